/**
 * Asks an upstream what kind it is, at most three `GET`s beside its API, in order: `/props` (llama.cpp) → `/version`
 * answering `{"version"}` (vLLM) → `/api/version` answering `{"version"}` (Ollama). Any answer whose `Server` header
 * is llama.cpp's settles it at once. Each request is bounded (`PROBE_TIMEOUT`) and so is the whole probe
 * (`PROBE_BUDGET`), by the Clock. No route answering is a definite "none"; a route that did not answer (refused,
 * timed out, a server error) leaves the kind unsettled, to be asked again later.
 */
import type * as Undici from "@effect/platform-node/Undici"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { propsAnswer } from "./chatTemplate.js"
import { getJson, type GetAnswer, type GetTarget } from "./upstreamGet.js"
import { isLlamaCppServer, LLAMA_CPP, NO_KIND, ollama, rootOf, type UpstreamKind, versionOf, vllm } from "./upstreamKind.js"

export const PROBE_TIMEOUT = Duration.seconds(2)
export const PROBE_BUDGET = Duration.seconds(3)

/** What a probe found: a kind (`settled`), or nothing for now (`settled: false`: ask again later). */
export interface ProbeOutcome {
  readonly kind: UpstreamKind
  readonly settled: boolean
  /** The routes asked, and how each answered: for the log. */
  readonly asked: ReadonlyArray<string>
}

type Route = "/props" | "/version" | "/api/version"

/** One route's answer: the kind it names, `no` (a definite "not this"), or `unknown` (no answer). */
export const readAnswer = (route: Route, answer: GetAnswer): UpstreamKind | "no" | "unknown" => {
  if (answer._tag !== "Unreachable" && isLlamaCppServer(answer.server)) return LLAMA_CPP
  if (route === "/props") {
    const props = propsAnswer(answer)
    if (props._tag === "Props") return props.props.llamaCpp ? LLAMA_CPP : "no"
    return props._tag === "Unreachable" ? "unknown" : "no"
  }
  switch (answer._tag) {
    case "Json": {
      const version = versionOf(answer.json)
      if (version === undefined) return "no"
      return route === "/version" ? vllm(version) : ollama(version)
    }
    case "Other":
      return answer.status >= 500 || answer.status === 429 ? "unknown" : "no"
    case "Unreachable":
      return "unknown"
  }
}

const describeAnswer = (answer: GetAnswer): string => {
  switch (answer._tag) {
    case "Json":
      return "json"
    case "Other":
      return String(answer.status)
    case "Unreachable":
      return answer.timedOut ? "timeout" : "unreachable"
  }
}

export interface ProbeTarget extends GetTarget {
  readonly baseUrl: string
  /** `/props` was read already (by `toolFormats: "auto"`) and is not llama.cpp's: it is not asked again. */
  readonly skipProps?: boolean
}

export const probeKind = (dispatcher: Undici.Dispatcher, target: ProbeTarget): Effect.Effect<ProbeOutcome> => {
  const root = rootOf(target.baseUrl)
  const routes: ReadonlyArray<Route> = target.skipProps === true ? ["/version", "/api/version"] : ["/props", "/version", "/api/version"]
  const asked: Array<string> = []
  const probe = Effect.gen(function* () {
    let unknown = false
    for (const route of routes) {
      const url = `${root}${route}`
      if (!URL.canParse(url)) return { kind: NO_KIND, settled: true, asked }
      const answer = yield* getJson(dispatcher, new URL(url), target, PROBE_TIMEOUT)
      asked.push(`${route}:${describeAnswer(answer)}`)
      const read = readAnswer(route, answer)
      if (typeof read === "object") return { kind: read, settled: true, asked }
      if (read === "unknown") unknown = true
      // Refused or reset: the next route of the same host would be too.
      if (answer._tag === "Unreachable" && !answer.timedOut) break
    }
    return { kind: NO_KIND, settled: !unknown, asked }
  })
  return probe.pipe(
    Effect.timeoutOption(PROBE_BUDGET),
    Effect.map(Option.getOrElse((): ProbeOutcome => ({ kind: NO_KIND, settled: false, asked: [...asked, "budget spent"] })))
  )
}
