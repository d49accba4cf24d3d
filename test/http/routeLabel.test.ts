import { describe, expect, it } from "@effect/vitest"
import { ROUTES, routeLabel, UNMATCHED } from "../../src/observability/routeLabel.js"

describe("routeLabel", () => {
  it("every known route is its own label", () => {
    expect([...ROUTES]).toEqual([
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
    ])
    for (const route of ROUTES) expect(routeLabel(route)).toBe(route)
  })

  // The router serves these as the route (find-my-way: case-insensitive, trailing and duplicate slashes ignored).
  it.each([
    ["/v1/models?limit=5", "/v1/models"],
    ["/metrics?x=1&y=2", "/metrics"],
    ["/?", "/"],
    ["/healthz#top", "/healthz"],
    ["/v1/models;jsessionid=1", "/v1/models"],
    ["/v1/models/", "/v1/models"],
    ["/V1/MODELS", "/v1/models"],
    ["//v1//chat/completions", "/v1/chat/completions"],
    ["/v1/%6Dodels", "/v1/models"],
    ["/v1/messages/count_tokens/", "/v1/messages/count_tokens"],
    ["http://example.com/v1/responses", "/v1/responses"],
    ["https://example.com/", "/"],
    ["/v1/models/qwen3-8b", "/v1/models/{id}"],
    ["/v1/models/Qwen/Qwen3-8B?x=1", "/v1/models/{id}"],
    ["/v1/responses/resp_AbC-1_2", "/v1/responses/{id}"],
    ["/v1/responses/resp_1/input_items?limit=2&order=asc", "/v1/responses/{id}/input_items"],
    ["/v1/responses/resp_1/", "/v1/responses/{id}"]
  ])("%j is labelled %j, as the router matches it", (url, label) => {
    expect(routeLabel(url)).toBe(label)
  })

  it.each([
    "",
    "/nothing-here",
    "/v1",
    "/v1/chat/completions/../models",
    "/v1/messages/count_tokens/x",
    "/v1/%E2%9C%93",
    "/v1/models%2",
    "?/v1/models",
    "v1/models",
    "ftp://example.com/v1/models",
    "/" + "a".repeat(10_000)
  ])("%j is unmatched", (url) => {
    expect(routeLabel(url)).toBe(UNMATCHED)
  })

  it("the label set is closed: the routes plus one", () => {
    const urls = Array.from({ length: 1000 }, (_, i) => `/p/${i}?q=${i}`).concat(ROUTES, ROUTES.map((r) => r.toUpperCase()))
    expect(new Set(urls.map(routeLabel)).size).toBe(ROUTES.length + 1)
  })
})
