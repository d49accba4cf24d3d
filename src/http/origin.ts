import { routeLabel } from "../observability/routeLabel.js"

/**
 * What a browser may do with the edge. A page on any site can make a browser
 * POST to `127.0.0.1` (the CORS preflight only stops it from reading the
 * answer), and a DNS-rebinding page can even read it: so a request with an
 * `Origin` must come from a configured origin, and an edge bound to loopback
 * answers only to loopback `Host` names. Pure: the middleware in HttpLive.ts
 * applies the decision.
 */

export interface OriginPolicy {
  /** Normalised (see `normaliseOrigin`). */
  readonly allowedOrigins: ReadonlySet<string>
  /** Accepted `Host` names (lower case, no port); `undefined`: any (the edge does not bind loopback). */
  readonly allowedHosts: ReadonlySet<string> | undefined
}

export interface RequestFacts {
  readonly method: string
  readonly url: string
  /** Lower-case names, as Node gives them. */
  readonly headers: Readonly<Record<string, string | undefined>>
}

export type OriginDecision =
  /** Serve the request; add `headers` to its response (CORS headers for an allowed origin, else none). */
  | { readonly _tag: "Pass"; readonly headers: Readonly<Record<string, string>> }
  /** Answer the preflight with 204 and these headers. */
  | { readonly _tag: "Preflight"; readonly headers: Readonly<Record<string, string>> }
  | { readonly _tag: "HostRefused"; readonly host: string }
  | { readonly _tag: "OriginRefused"; readonly origin: string }

/** Request headers a preflight is granted when it names none (or names them in a malformed list). */
export const DEFAULT_ALLOWED_HEADERS: ReadonlyArray<string> = [
  "authorization",
  "content-type",
  "x-api-key",
  "x-request-id",
  "anthropic-version",
  "anthropic-beta",
  "anthropic-dangerous-direct-browser-access",
  "openai-organization",
  "openai-project",
  "openai-beta",
  "idempotency-key",
  "x-stainless-arch",
  "x-stainless-lang",
  "x-stainless-os",
  "x-stainless-package-version",
  "x-stainless-retry-count",
  "x-stainless-runtime",
  "x-stainless-runtime-version",
  "x-stainless-timeout",
  "x-stainless-helper-method"
]

/** Response headers a page may read beside the CORS-safelisted ones. */
const EXPOSED_HEADERS = "x-request-id, retry-after, x-should-retry"
const ALLOWED_METHODS = "GET, POST, DELETE, OPTIONS"
const MAX_AGE_SECONDS = "600"

const LOOPBACK_NAMES: ReadonlyArray<string> = ["localhost", "127.0.0.1", "[::1]"]

const isLoopbackV4 = (s: string): boolean => {
  const parts = s.split(".")
  return parts.length === 4 && parts[0] === "127" && parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255)
}

/** The eight groups of an IPv6 address (`::` expanded), or undefined when it is not one. */
const ipv6Groups = (s: string): ReadonlyArray<number> | undefined => {
  const halves = s.split("::")
  if (halves.length > 2) return undefined
  const parse = (part: string) => (part === "" ? [] : part.split(":"))
  const head = parse(halves[0] ?? "")
  const tail = halves.length === 2 ? parse(halves[1] ?? "") : []
  const missing = 8 - head.length - tail.length
  if (halves.length === 2 ? missing < 1 : missing !== 0) return undefined
  const groups = [...head, ...Array.from({ length: missing }, () => "0"), ...tail]
  return groups.every((g) => /^[0-9a-f]{1,4}$/.test(g)) ? groups.map((g) => Number.parseInt(g, 16)) : undefined
}

/** Whether a listen address is loopback: 127.0.0.0/8, ::1 (any spelling), or `localhost`. */
export const isLoopbackBind = (host: string): boolean => {
  const h = host.toLowerCase().replace(/^\[(.*)\]$/, "$1")
  if (h === "localhost" || isLoopbackV4(h)) return true
  if (h.startsWith("::ffff:")) return isLoopbackV4(h.slice(7))
  const groups = ipv6Groups(h)
  return groups !== undefined && groups.every((g, i) => g === (i === 7 ? 1 : 0))
}

/** The name of a `Host` header: lower case, without its port (`[::1]:8080` → `[::1]`). */
export const hostName = (header: string): string => {
  const h = header.trim().toLowerCase()
  if (h.startsWith("[")) {
    const end = h.indexOf("]")
    return end === -1 ? h : h.slice(0, end + 1)
  }
  const colon = h.indexOf(":")
  return colon === -1 ? h : h.slice(0, colon)
}

/** An allowed-hosts entry as `hostName` spells a header: a bare IPv6 address gets its brackets. */
const hostEntry = (entry: string): string => {
  const e = entry.trim().toLowerCase()
  return e.includes(":") && !e.startsWith("[") ? `[${e}]` : hostName(e)
}

/** An origin as browsers serialise it: lower case, no trailing slash, no default port. */
export const normaliseOrigin = (origin: string): string => {
  const o = origin.trim().toLowerCase().replace(/\/$/, "")
  if (o.startsWith("https://") && o.endsWith(":443")) return o.slice(0, -4)
  if (o.startsWith("http://") && o.endsWith(":80")) return o.slice(0, -3)
  return o
}

export const makeOriginPolicy = (server: {
  readonly host: string
  readonly cors: { readonly allowedOrigins: ReadonlyArray<string> }
  readonly allowedHosts: ReadonlyArray<string>
}): OriginPolicy => ({
  allowedOrigins: new Set(server.cors.allowedOrigins.map(normaliseOrigin)),
  allowedHosts: isLoopbackBind(server.host)
    ? new Set([...LOOPBACK_NAMES, hostEntry(server.host), ...server.allowedHosts.map(hostEntry)])
    : undefined
})

/** A comma-separated list of header names, as browsers send it; anything else is not echoed. */
const HEADER_LIST = /^[!#$%&'*+.^_`|~0-9a-z-]+(\s*,\s*[!#$%&'*+.^_`|~0-9a-z-]+)*$/i

const allowHeaders = (requested: string | undefined): string =>
  requested !== undefined && requested.length <= 2048 && HEADER_LIST.test(requested)
    ? requested
    : DEFAULT_ALLOWED_HEADERS.join(", ")

export const decide = (policy: OriginPolicy, request: RequestFacts): OriginDecision => {
  const host = request.headers["host"]
  if (policy.allowedHosts !== undefined && host !== undefined && !policy.allowedHosts.has(hostName(host))) {
    return { _tag: "HostRefused", host }
  }
  const origin = request.headers["origin"]
  if (origin === undefined) return { _tag: "Pass", headers: {} }
  const route = routeLabel(request.url)
  const allowed = policy.allowedOrigins.has(normaliseOrigin(origin))
  if (!allowed) {
    // Probes are read by monitors, not pages; an answer tells a page nothing it could use.
    const probe = route === "/healthz" || route === "/metrics"
    return probe ? { _tag: "Pass", headers: {} } : { _tag: "OriginRefused", origin }
  }
  const requestedMethod = request.headers["access-control-request-method"]
  if (request.method === "OPTIONS" && requestedMethod !== undefined && route.startsWith("/v1/")) {
    return {
      _tag: "Preflight",
      headers: {
        "access-control-allow-origin": origin,
        "access-control-allow-methods": ALLOWED_METHODS,
        "access-control-allow-headers": allowHeaders(request.headers["access-control-request-headers"]),
        "access-control-max-age": MAX_AGE_SECONDS,
        vary: "Origin, Access-Control-Request-Method, Access-Control-Request-Headers"
      }
    }
  }
  return {
    _tag: "Pass",
    headers: { "access-control-allow-origin": origin, "access-control-expose-headers": EXPOSED_HEADERS, vary: "Origin" }
  }
}
