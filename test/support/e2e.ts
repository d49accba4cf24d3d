import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { expect } from "vitest"
import { chunk, frame } from "./fakeUpstream.js"

/** Small helpers for black-box tests over HTTP: raw SSE reading, Prometheus text, polling, a gated upstream. */

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/**
 * How long `eventually` polls before it gives up with the probe's last failure. It is a hang guard, not a
 * budget: what a test waits for happens in milliseconds, and the guard only has to stay under vitest's test and
 * hook timeouts (30 s, vitest.config.ts) so that a failure shows the probe's error rather than a bare timeout.
 */
export const HANG_GUARD_MS = 20_000

/** Polls `probe` until it returns without throwing (returns its value); gives up after `HANG_GUARD_MS`. */
export const eventually = async <A>(probe: () => A | Promise<A>, everyMs = 25): Promise<A> => {
  const timeoutMs = HANG_GUARD_MS
  const deadline = Date.now() + timeoutMs
  for (;;) {
    try {
      return await probe()
    } catch (e) {
      if (Date.now() > deadline) throw e
      await sleep(everyMs)
    }
  }
}

export interface SseResult {
  /** The whole body as received. */
  readonly raw: string
  /** The `data:` payloads, in order (including `[DONE]`). */
  readonly data: ReadonlyArray<string>
  /** The JSON events (everything but `[DONE]`). */
  readonly events: ReadonlyArray<any>
}

/**
 * Splits an SSE body into events and checks the framing: every event is
 * exactly `data: <payload>\n\n` (no other fields, no comments).
 */
export const parseSse = (raw: string): SseResult => {
  expect(raw.endsWith("\n\n"), `SSE body ends with a blank line: ${JSON.stringify(raw.slice(-40))}`).toBe(true)
  const blocks = raw.slice(0, -2).split("\n\n")
  const data = blocks.map((block) => {
    expect(block, "every SSE event is one `data: ` line").toMatch(/^data: [^\n]*$/)
    return block.slice("data: ".length)
  })
  const events = data.filter((d) => d !== "[DONE]").map((d) => JSON.parse(d))
  return { raw, data, events }
}

/** Asserts the contract's stream ending: `data: [DONE]\n\n` once, at the very end. */
export const expectDoneOnce = (sse: SseResult): void => {
  expect(sse.data.filter((d) => d === "[DONE]")).toHaveLength(1)
  expect(sse.raw.endsWith("data: [DONE]\n\n")).toBe(true)
  expect(sse.data[sse.data.length - 1]).toBe("[DONE]")
}

/** POSTs JSON (or a raw string) to `url`. */
export const postJson = (url: string, body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal) =>
  fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
    ...(signal !== undefined ? { signal } : {})
  })

/** Reads an SSE response to its end. */
export const readSse = async (response: Response): Promise<SseResult> => parseSse(await response.text())

/**
 * Reads an SSE response event by event. `next()` resolves with the next
 * `data:` payload, or undefined at the end of the body.
 */
export const sseReader = (response: Response) => {
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  let buffer = ""
  let raw = ""
  return {
    raw: () => raw,
    next: async (): Promise<string | undefined> => {
      for (;;) {
        const end = buffer.indexOf("\n\n")
        if (end >= 0) {
          const block = buffer.slice(0, end)
          buffer = buffer.slice(end + 2)
          return block.startsWith("data: ") ? block.slice(6) : block
        }
        const { done, value } = await reader.read()
        if (done) return undefined
        const text = decoder.decode(value, { stream: true })
        raw += text
        buffer += text
      }
    },
    /** Reads until the end of the body, returning all of it (including what `next()` already returned). */
    rest: async (): Promise<string> => {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) return raw
        raw += decoder.decode(value, { stream: true })
      }
    },
    cancel: () => reader.cancel()
  }
}

/** Reads data payloads until one whose JSON has non-empty `choices[0].delta.content`. */
export const untilContent = async (reader: ReturnType<typeof sseReader>): Promise<any> => {
  for (;;) {
    const data = await reader.next()
    if (data === undefined) throw new Error(`stream ended before any content: ${reader.raw()}`)
    if (data === "[DONE]") throw new Error(`stream done before any content: ${reader.raw()}`)
    const event = JSON.parse(data)
    if (typeof event?.choices?.[0]?.delta?.content === "string" && event.choices[0].delta.content !== "") return event
  }
}

// ---------------------------------------------------------------------------
// Prometheus text exposition

export interface Sample {
  readonly name: string
  readonly labels: Record<string, string>
  readonly value: number
}

const SAMPLE = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/
const LABEL = /([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"/g

export const parsePrometheus = (text: string): ReadonlyArray<Sample> =>
  text
    .split("\n")
    .filter((line) => line !== "" && !line.startsWith("#"))
    .map((line) => {
      const m = SAMPLE.exec(line)
      if (m === null) throw new Error(`not a Prometheus sample line: ${line}`)
      const labels: Record<string, string> = {}
      for (const l of (m[2] ?? "").matchAll(LABEL)) labels[l[1]!] = l[2]!
      return { name: m[1]!, labels, value: Number(m[3]) }
    })

/** The sum of the samples of `name` whose labels include `labels`. */
export const metricSum = (text: string, name: string, labels: Record<string, string> = {}): number =>
  parsePrometheus(text)
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0)

export const fetchMetrics = async (url: string): Promise<string> => {
  const response = await fetch(`${url}/metrics`)
  expect(response.status).toBe(200)
  return response.text()
}

/** The JSON body of a response, untyped (for assertions). */
export const jsonOf = async (response: Response): Promise<any> => response.json()

// ---------------------------------------------------------------------------
// An upstream the test holds open

export interface GatedUpstream {
  /** Base URL ending in `/v1`. */
  readonly url: string
  /** Chat requests received so far. */
  readonly requests: () => number
  /** Lets every stream, open or to come, send the rest of its text and end. */
  readonly release: () => void
  readonly close: () => Promise<void>
}

/**
 * An OpenAI-compatible upstream whose streams send `head`, then wait for `release()` before they send `tail`, a
 * stop finish chunk and `[DONE]`: a stream stays open exactly as long as the test needs, however slow the machine.
 */
export const startGatedUpstream = async (head = "Hel", tail = "lo"): Promise<GatedUpstream> => {
  let release: () => void = () => undefined
  const gate = new Promise<void>((resolve) => (release = resolve))
  let requests = 0
  const server = http.createServer((req, res) => {
    req.resume()
    req.on("end", () => {
      requests++
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
      res.write(frame(chunk({ role: "assistant", content: "" })) + frame(chunk({ content: head })))
      void gate.then(() => res.end(frame(chunk({ content: tail })) + frame(chunk({ finish_reason: "stop" })) + "data: [DONE]\n\n"))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    requests: () => requests,
    release: () => release(),
    close: () =>
      new Promise<void>((resolve) => {
        release()
        server.close(() => resolve())
        server.closeAllConnections()
      })
  }
}
