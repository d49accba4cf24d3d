/**
 * The `route` label of `/metrics`: a known route as itself, anything else as
 * one value, so that requests to arbitrary paths cannot grow the series set.
 * The list of the edge's routes lives here and nowhere else.
 */

export const ROUTES = [
  "/v1/chat/completions",
  "/v1/models",
  "/v1/models/{id}",
  "/v1/responses",
  "/v1/responses/{id}",
  "/v1/responses/{id}/input_items",
  "/v1/messages",
  "/v1/messages/count_tokens",
  "/healthz",
  "/metrics",
  "/"
] as const

export type Route = (typeof ROUTES)[number]

export const UNMATCHED = "unmatched"

export type RouteLabel = Route | typeof UNMATCHED

const isRoute = (path: string): path is Route => ROUTES.some((r) => r === path)

/** ASCII escapes only: the routes are ASCII, so a path with any other escape cannot match one anyway. */
const decodeAscii = (path: string): string =>
  path.replace(/%([0-7][0-9A-Fa-f])/g, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)))

/**
 * The label of a request URL. The path is normalised as the router
 * (find-my-way's defaults) matches it: absolute form, duplicate slashes, the
 * query (`?`, `;`, `#`), escapes, one trailing slash and case do not matter.
 */
export const routeLabel = (url: string): RouteLabel => {
  const origin = url.startsWith("/") ? url : url.replace(/^https?:\/\/.*?\//, "/")
  const collapsed = origin.replace(/\/\/+/g, "/")
  const end = collapsed.slice(1).search(/[?;#]/)
  const decoded = decodeAscii(end === -1 ? collapsed : collapsed.slice(0, end + 1))
  const trimmed = decoded.length > 1 && decoded.endsWith("/") ? decoded.slice(0, -1) : decoded
  const path = trimmed.toLowerCase()
  if (isRoute(path)) return path
  // One model (`GET /v1/models/{id}`), one stored response: one label, whatever the id.
  if (path.startsWith("/v1/models/")) return "/v1/models/{id}"
  const stored = /^\/v1\/responses\/[^/]+(\/input_items)?$/.exec(path)
  if (stored === null) return UNMATCHED
  return stored[1] === undefined ? "/v1/responses/{id}" : "/v1/responses/{id}/input_items"
}
