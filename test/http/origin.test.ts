import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import {
  type OriginDecision,
  type RequestFacts,
  decide,
  DEFAULT_ALLOWED_HEADERS,
  hostName,
  isLoopbackBind,
  makeOriginPolicy,
  normaliseOrigin
} from "../../src/http/origin.js"

const policy = (host = "127.0.0.1", allowedOrigins: ReadonlyArray<string> = [], allowedHosts: ReadonlyArray<string> = []) =>
  makeOriginPolicy({ host, cors: { allowedOrigins }, allowedHosts })

const req = (url: string, headers: Record<string, string> = {}, method = "POST"): RequestFacts => ({
  method,
  url,
  headers: { host: "127.0.0.1:8080", ...headers }
})

const tag = (d: OriginDecision) => d._tag

describe("bind address: loopback or not", () => {
  it.each([
    ["127.0.0.1", true],
    ["127.1.2.3", true],
    ["127.255.255.255", true],
    ["localhost", true],
    ["LocalHost", true],
    ["::1", true],
    ["[::1]", true],
    ["0:0:0:0:0:0:0:1", true],
    ["::ffff:127.0.0.1", true],
    ["0000:0000::0001", true],
    ["::2", false],
    ["1::1", false],
    ["::1::", false],
    ["0.0.0.0", false],
    ["::", false],
    ["", false],
    ["192.168.1.10", false],
    ["128.0.0.1", false],
    ["127.0.0.256", false],
    ["127.0.0", false],
    ["localhost.example.com", false],
    ["edge.internal", false]
  ])("%s → %s", (host, loopback) => {
    expect(isLoopbackBind(host)).toBe(loopback)
  })
})

describe("Host header: the name without its port", () => {
  it.each([
    ["localhost", "localhost"],
    ["localhost:8080", "localhost"],
    ["LOCALHOST:8080", "localhost"],
    ["127.0.0.1:1", "127.0.0.1"],
    ["[::1]:8080", "[::1]"],
    ["[::1]", "[::1]"],
    ["[::1", "[::1"],
    ["evil.example:80", "evil.example"],
    ["localhost.", "localhost."],
    ["", ""]
  ])("%s → %s", (header, name) => {
    expect(hostName(header)).toBe(name)
  })
})

describe("origins are compared as browsers serialise them", () => {
  it.each([
    ["https://app.example", "https://app.example"],
    ["HTTPS://App.Example", "https://app.example"],
    ["https://app.example/", "https://app.example"],
    ["https://app.example:443", "https://app.example"],
    ["http://app.example:80", "http://app.example"],
    ["http://app.example:8080", "http://app.example:8080"],
    ["https://app.example:80", "https://app.example:80"],
    ["null", "null"]
  ])("%s → %s", (origin, normal) => {
    expect(normaliseOrigin(origin)).toBe(normal)
  })
})

describe("Host check (DNS rebinding) on a loopback bind", () => {
  it.each(["localhost", "localhost:8080", "127.0.0.1", "127.0.0.1:9", "[::1]", "[::1]:8080", "LOCALHOST:1"])(
    "%s is accepted",
    (host) => {
      expect(decide(policy(), req("/v1/chat/completions", { host }))).toEqual({ _tag: "Pass", headers: {} })
    }
  )

  it.each(["evil.example", "evil.example:8080", "localhost.evil.example", "127.0.0.1.nip.io", "localhost.", "[::2]", "0.0.0.0"])(
    "%s is refused, on every path (probes included)",
    (host) => {
      for (const url of ["/v1/chat/completions", "/v1/models", "/healthz", "/metrics", "/nope"]) {
        expect(decide(policy(), req(url, { host }))).toEqual({ _tag: "HostRefused", host })
      }
    }
  )

  it("server.allowedHosts adds names (case-insensitive, any port)", () => {
    const p = policy("127.0.0.1", [], ["edge.lan", "Box.Local", "::1"])
    expect(tag(decide(p, req("/v1/models", { host: "edge.lan:8080" })))).toBe("Pass")
    expect(tag(decide(p, req("/v1/models", { host: "EDGE.LAN" })))).toBe("Pass")
    expect(tag(decide(p, req("/v1/models", { host: "box.local:1" })))).toBe("Pass")
    expect(tag(decide(p, req("/v1/models", { host: "sub.edge.lan" })))).toBe("HostRefused")
  })

  it("the bind address itself is accepted as a Host (an IP literal cannot be rebound)", () => {
    expect(tag(decide(policy("127.0.0.2"), req("/v1/models", { host: "127.0.0.2:8080" })))).toBe("Pass")
    expect(tag(decide(policy("127.0.0.2"), req("/v1/models", { host: "127.0.0.3:8080" })))).toBe("HostRefused")
  })

  it("no Host at all (HTTP/1.0, not a browser) passes", () => {
    expect(decide(policy(), { method: "GET", url: "/v1/models", headers: {} })).toEqual({ _tag: "Pass", headers: {} })
  })

  it("a server bound to a routable address checks no Host", () => {
    for (const host of ["0.0.0.0", "::", "10.0.0.5", "edge.internal"]) {
      expect(tag(decide(policy(host), req("/v1/models", { host: "evil.example" })))).toBe("Pass")
    }
  })

  it.prop(
    "any Host outside the allowed names is refused; requests are never refused for their Host when not on loopback",
    [fc.domain()],
    ([domain]) => {
      const refused = !["localhost"].includes(domain.toLowerCase())
      expect(tag(decide(policy(), req("/v1/chat/completions", { host: `${domain}:8080` })))).toBe(
        refused ? "HostRefused" : "Pass"
      )
      expect(tag(decide(policy("0.0.0.0"), req("/v1/chat/completions", { host: domain })))).toBe("Pass")
    }
  )
})

describe("Origin check (cross-origin browser requests)", () => {
  const allowed = policy("127.0.0.1", ["https://app.example", "http://localhost:3000"])

  it("no Origin (SDKs, curl, agents): passes untouched, with or without allowed origins", () => {
    expect(decide(policy(), req("/v1/chat/completions"))).toEqual({ _tag: "Pass", headers: {} })
    expect(decide(allowed, req("/v1/chat/completions"))).toEqual({ _tag: "Pass", headers: {} })
  })

  it("by default no origin is allowed: any Origin on /v1 is refused", () => {
    for (const origin of ["https://app.example", "http://localhost:8080", "http://127.0.0.1:8080", "null", "file://"]) {
      expect(decide(policy(), req("/v1/chat/completions", { origin }))).toEqual({ _tag: "OriginRefused", origin })
      expect(tag(decide(policy(), req("/v1/models", { origin }, "GET")))).toBe("OriginRefused")
      expect(tag(decide(policy(), req("/unknown", { origin }, "GET")))).toBe("OriginRefused")
    }
  })

  it("a same-origin-looking request is still cross-origin for the edge (it serves no pages; rebinding would look so)", () => {
    expect(tag(decide(policy("0.0.0.0"), req("/v1/chat/completions", { host: "evil.example:8080", origin: "http://evil.example:8080" })))).toBe(
      "OriginRefused"
    )
  })

  it("/healthz and /metrics skip the Origin check", () => {
    for (const url of ["/healthz", "/metrics", "/HEALTHZ/", "/metrics?x=1"]) {
      expect(decide(policy(), req(url, { origin: "https://evil.example" }, "GET"))).toEqual({ _tag: "Pass", headers: {} })
    }
  })

  it("an allowed origin gets its CORS headers on the response", () => {
    expect(decide(allowed, req("/v1/chat/completions", { origin: "https://app.example" }))).toEqual({
      _tag: "Pass",
      headers: {
        "access-control-allow-origin": "https://app.example",
        "access-control-expose-headers": "x-request-id, retry-after, x-should-retry",
        vary: "Origin"
      }
    })
    // As the browser sent it, however the config spells it.
    const d = decide(policy("127.0.0.1", ["HTTPS://APP.EXAMPLE:443/"]), req("/v1/models", { origin: "https://app.example" }, "GET"))
    expect(d._tag === "Pass" && d.headers["access-control-allow-origin"]).toBe("https://app.example")
  })

  it("an origin is allowed only exactly: scheme, host and port", () => {
    for (const origin of ["http://app.example", "https://app.example:8443", "https://sub.app.example", "https://app.example.evil"]) {
      expect(tag(decide(allowed, req("/v1/chat/completions", { origin })))).toBe("OriginRefused")
    }
  })

  it.prop("any origin not configured is refused on /v1", [fc.webUrl()], ([url]) => {
    const origin = new URL(url).origin
    const isAllowed = origin === "https://app.example" || origin === "http://localhost:3000"
    expect(tag(decide(allowed, req("/v1/chat/completions", { origin })))).toBe(isAllowed ? "Pass" : "OriginRefused")
  })

  it("the Host check comes first", () => {
    expect(tag(decide(allowed, req("/v1/models", { host: "evil.example", origin: "https://app.example" }, "GET")))).toBe("HostRefused")
  })
})

describe("CORS preflight", () => {
  const allowed = policy("127.0.0.1", ["https://app.example"])
  const preflight = (url: string, headers: Record<string, string>) =>
    decide(allowed, req(url, { origin: "https://app.example", "access-control-request-method": "POST", ...headers }, "OPTIONS"))

  it("an allowed origin's preflight for a /v1 route: 204 headers, requested headers echoed", () => {
    expect(preflight("/v1/chat/completions", { "access-control-request-headers": "authorization,content-type,x-stainless-os" })).toEqual({
      _tag: "Preflight",
      headers: {
        "access-control-allow-origin": "https://app.example",
        "access-control-allow-methods": "GET, POST, DELETE, OPTIONS",
        "access-control-allow-headers": "authorization,content-type,x-stainless-os",
        "access-control-max-age": "600",
        vary: "Origin, Access-Control-Request-Method, Access-Control-Request-Headers"
      }
    })
  })

  it("without Access-Control-Request-Headers, or with a malformed one: the default list", () => {
    for (const headers of [{}, { "access-control-request-headers": "a b\r\nx: y" }, { "access-control-request-headers": "x".repeat(5000) }]) {
      const d = preflight("/v1/models", headers)
      expect(d._tag === "Preflight" && d.headers["access-control-allow-headers"]).toBe(DEFAULT_ALLOWED_HEADERS.join(", "))
    }
    for (const h of ["authorization", "content-type", "x-api-key", "anthropic-version", "anthropic-beta", "x-request-id", "openai-organization", "openai-project"]) {
      expect(DEFAULT_ALLOWED_HEADERS).toContain(h)
    }
  })

  it("a refused origin's preflight is refused", () => {
    const d = decide(policy(), req("/v1/chat/completions", { origin: "https://app.example", "access-control-request-method": "POST" }, "OPTIONS"))
    expect(d).toEqual({ _tag: "OriginRefused", origin: "https://app.example" })
  })

  it("OPTIONS that is not a preflight, or not for a /v1 route, goes to the router", () => {
    expect(tag(decide(allowed, req("/v1/models", { origin: "https://app.example" }, "OPTIONS")))).toBe("Pass")
    expect(tag(preflight("/other", {}))).toBe("Pass")
    expect(tag(decide(allowed, req("/v1/models", {}, "OPTIONS")))).toBe("Pass")
  })
})
