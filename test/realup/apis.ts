/**
 * The three APIs of the edge through plain `fetch` (and `eventsource-parser` for streams), each answer reduced to
 * what the tier checks: content, reasoning, tool calls (arguments parsed), the finish, and every text that reached
 * the client (each delta, each final field), to look for markup in.
 */
import { createParser } from "eventsource-parser"

export type Api = "chat" | "responses" | "messages"
export const APIS: ReadonlyArray<Api> = ["chat", "responses", "messages"]

export interface Call {
  readonly name: string
  readonly arguments: unknown
}

export interface Outcome {
  readonly content: string
  readonly reasoning: string
  readonly calls: ReadonlyArray<Call>
  /** Chat: finish_reason; Responses: status (+ incomplete reason); Messages: stop_reason. */
  readonly finish: string | null
  /** Every text the client saw (deltas and final fields): no marker may be in any of them. */
  readonly texts: ReadonlyArray<string>
  /** An error the stream ended with (in-band, after the 200). */
  readonly error?: string
  /** The raw answer: the JSON body, or the SSE events' data. */
  readonly raw: unknown
}

const USER = "What will the weather be in São Paulo over the next 3 days?"
const PARAMETERS = {
  type: "object",
  properties: { city: { type: "string" }, days: { type: "integer" } },
  required: ["city", "days"]
}
const SEARCH = { type: "object", properties: { query: { type: "string" } }, required: ["query"] }

type Json = Record<string, unknown>

export interface Ask {
  readonly url: string
  readonly model: string
  readonly api: Api
  readonly stream: boolean
  readonly maxTokens?: number
}

/** The edge refused the answer (a status other than 200): its status and body. */
export class Refused extends Error {
  constructor(readonly status: number, readonly body: string) {
    super(`HTTP ${status}: ${body}`)
  }
}

const bodyOf = (a: Ask): Json => {
  switch (a.api) {
    case "chat":
      return {
        model: a.model,
        stream: a.stream,
        messages: [{ role: "user", content: USER }],
        tools: [
          { type: "function", function: { name: "get_weather", description: "The forecast", parameters: PARAMETERS } },
          { type: "function", function: { name: "search", description: "Web search", parameters: SEARCH } }
        ],
        ...(a.maxTokens !== undefined ? { max_tokens: a.maxTokens } : {})
      }
    case "responses":
      return {
        model: a.model,
        stream: a.stream,
        input: USER,
        tools: [
          { type: "function", name: "get_weather", description: "The forecast", parameters: PARAMETERS },
          { type: "function", name: "search", description: "Web search", parameters: SEARCH }
        ],
        ...(a.maxTokens !== undefined ? { max_output_tokens: a.maxTokens } : {})
      }
    case "messages":
      return {
        model: a.model,
        stream: a.stream,
        max_tokens: a.maxTokens ?? 1024,
        // Without it the Messages API hides the model's reasoning.
        thinking: { type: "enabled", budget_tokens: 512 },
        messages: [{ role: "user", content: USER }],
        tools: [
          { name: "get_weather", description: "The forecast", input_schema: PARAMETERS },
          { name: "search", description: "Web search", input_schema: SEARCH }
        ]
      }
  }
}

const PATHS: Record<Api, string> = { chat: "/v1/chat/completions", responses: "/v1/responses", messages: "/v1/messages" }

const parseArgs = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return { unparsable: text }
  }
}

const obj = (v: unknown): Json => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Json) : {})
const arr = (v: unknown): ReadonlyArray<unknown> => (Array.isArray(v) ? v : [])
const str = (v: unknown): string => (typeof v === "string" ? v : "")

export const ask = (a: Ask): Promise<Outcome> => send(a.url, a.api, a.stream, bodyOf(a))

/** A body the caller built (its `stream` field must match `stream`), to the API's path of the edge at `url`. */
export const send = async (url: string, api: Api, stream: boolean, body: Json): Promise<Outcome> => {
  const response = await fetch(url + PATHS[api], {
    method: "POST",
    headers: { "content-type": "application/json", "anthropic-version": "2023-06-01" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(120_000)
  })
  const text = await response.text()
  if (response.status !== 200) throw new Refused(response.status, text)
  if (!stream) {
    const json = obj(JSON.parse(text))
    return api === "chat" ? chatJson(json) : api === "responses" ? responsesJson(json) : messagesJson(json)
  }
  const events: Array<{ event: string | undefined; data: string }> = []
  const parser = createParser({ onEvent: (e) => events.push({ event: e.event, data: e.data }) })
  parser.feed(text)
  const datas = events.filter((e) => e.data !== "[DONE]").map((e) => obj(JSON.parse(e.data)))
  const out = api === "chat" ? chatSse(datas) : api === "responses" ? responsesSse(datas) : messagesSse(datas)
  const errors = datas.flatMap((d) =>
    d["error"] !== undefined ? [JSON.stringify(d["error"])] : d["type"] === "response.failed" ? [JSON.stringify(obj(d["response"])["error"])] : []
  )
  return errors.length > 0 ? { ...out, error: errors.join("; ") } : out
}

// --- Chat Completions

const chatJson = (json: Json): Outcome => {
  const choice = obj(arr(json["choices"])[0])
  const message = obj(choice["message"])
  const reasoning = str(message["reasoning_content"]) + str(message["reasoning"])
  const calls = arr(message["tool_calls"]).map((c) => {
    const fn = obj(obj(c)["function"])
    return { name: str(fn["name"]), arguments: parseArgs(str(fn["arguments"])) }
  })
  return {
    content: str(message["content"]),
    reasoning,
    calls,
    finish: typeof choice["finish_reason"] === "string" ? choice["finish_reason"] : null,
    texts: [str(message["content"]), str(message["reasoning_content"]), str(message["reasoning"])],
    raw: json
  }
}

const chatSse = (datas: ReadonlyArray<Json>): Outcome => {
  let content = ""
  let reasoning = ""
  let finish: string | null = null
  const texts: Array<string> = []
  const calls = new Map<number, { name: string; args: string }>()
  for (const d of datas) {
    for (const c of arr(d["choices"])) {
      const choice = obj(c)
      const delta = obj(choice["delta"])
      const t = str(delta["content"])
      const r = str(delta["reasoning_content"]) || str(delta["reasoning"])
      content += t
      reasoning += r
      texts.push(t, r)
      for (const tc of arr(delta["tool_calls"])) {
        const call = obj(tc)
        const index = typeof call["index"] === "number" ? call["index"] : 0
        const fn = obj(call["function"])
        const now = calls.get(index) ?? { name: "", args: "" }
        calls.set(index, { name: now.name + str(fn["name"]), args: now.args + str(fn["arguments"]) })
      }
      if (typeof choice["finish_reason"] === "string") finish = choice["finish_reason"]
    }
  }
  return {
    content,
    reasoning,
    calls: [...calls.values()].map((c) => ({ name: c.name, arguments: parseArgs(c.args) })),
    finish,
    texts,
    raw: datas
  }
}

// --- Responses

const responsesJson = (json: Json): Outcome => {
  let content = ""
  let reasoning = ""
  const calls: Array<Call> = []
  for (const o of arr(json["output"])) {
    const item = obj(o)
    if (item["type"] === "message") for (const p of arr(item["content"])) content += str(obj(p)["text"])
    else if (item["type"] === "reasoning") {
      for (const p of arr(item["summary"])) reasoning += str(obj(p)["text"])
      for (const p of arr(item["content"])) reasoning += str(obj(p)["text"])
    } else if (item["type"] === "function_call") {
      calls.push({ name: str(item["name"]), arguments: parseArgs(str(item["arguments"])) })
    }
  }
  const incomplete = str(obj(json["incomplete_details"])["reason"])
  return {
    content,
    reasoning,
    calls,
    finish: calls.length > 0 && json["status"] === "completed"
      ? "function_call"
      : `${str(json["status"])}${incomplete !== "" ? `:${incomplete}` : ""}`,
    texts: [content, reasoning],
    raw: json
  }
}

const responsesSse = (datas: ReadonlyArray<Json>): Outcome => {
  const texts: Array<string> = []
  let deltas = ""
  let final: Json | undefined
  for (const d of datas) {
    const type = str(d["type"])
    if (type.endsWith(".delta") && !type.includes("function_call")) texts.push(str(d["delta"]))
    if (type === "response.output_text.delta") deltas += str(d["delta"])
    if (type.endsWith(".done")) texts.push(str(d["text"]))
    if (type === "response.completed" || type === "response.incomplete" || type === "response.failed") {
      final = obj(d["response"])
    }
  }
  const out = responsesJson(final ?? {})
  return {
    ...out,
    // The streamed text must be the final text.
    content: deltas === out.content ? out.content : `${out.content} [streamed: ${deltas}]`,
    texts: [...texts, ...out.texts],
    raw: datas
  }
}

// --- Messages

const messagesJson = (json: Json): Outcome => {
  let content = ""
  let reasoning = ""
  const calls: Array<Call> = []
  for (const b of arr(json["content"])) {
    const block = obj(b)
    if (block["type"] === "text") content += str(block["text"])
    else if (block["type"] === "thinking") reasoning += str(block["thinking"])
    else if (block["type"] === "tool_use") calls.push({ name: str(block["name"]), arguments: block["input"] })
  }
  return {
    content,
    reasoning,
    calls,
    finish: typeof json["stop_reason"] === "string" ? json["stop_reason"] : null,
    texts: [content, reasoning],
    raw: json
  }
}

const messagesSse = (datas: ReadonlyArray<Json>): Outcome => {
  let content = ""
  let reasoning = ""
  let finish: string | null = null
  const texts: Array<string> = []
  const blocks = new Map<number, { name: string; json: string }>()
  for (const d of datas) {
    const type = str(d["type"])
    const index = typeof d["index"] === "number" ? d["index"] : -1
    if (type === "content_block_start") {
      const block = obj(d["content_block"])
      if (block["type"] === "tool_use") blocks.set(index, { name: str(block["name"]), json: "" })
      texts.push(str(block["text"]), str(block["thinking"]))
    } else if (type === "content_block_delta") {
      const delta = obj(d["delta"])
      if (delta["type"] === "text_delta") content += str(delta["text"])
      else if (delta["type"] === "thinking_delta") reasoning += str(delta["thinking"])
      else if (delta["type"] === "input_json_delta") {
        const b = blocks.get(index)
        if (b !== undefined) b.json += str(delta["partial_json"])
      }
      texts.push(str(delta["text"]), str(delta["thinking"]))
    } else if (type === "message_delta") {
      const stop = obj(d["delta"])["stop_reason"]
      if (typeof stop === "string") finish = stop
    }
  }
  return {
    content,
    reasoning,
    calls: [...blocks.values()].map((b) => ({ name: b.name, arguments: parseArgs(b.json === "" ? "{}" : b.json) })),
    finish,
    texts,
    raw: datas
  }
}

/** The finish each API gives a tool call. */
export const CALL_FINISH: Record<Api, string> = { chat: "tool_calls", responses: "function_call", messages: "tool_use" }
