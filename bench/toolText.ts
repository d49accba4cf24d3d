/** Throughput of the tool-text hold-back filter on streamed content, and whether its cost grows linearly with size. */
import * as Holdback from "../src/chat/filters/holdback.js"
import { TEXT_FORMATS, type RequestTool } from "../src/chat/toolcalls/types.js"

export interface ToolTextFigures {
  /** Plain prose: ns per 4-char delta with the five formats of before issue 20, with every family, and the ratio. */
  readonly plain: { readonly fiveNs: number; readonly allNs: number; readonly ratio: number }
  readonly mb1: { readonly seconds: number; readonly mbPerSec: number }
  readonly mb2: { readonly seconds: number; readonly mbPerSec: number }
  /** time(2 MB) / time(1 MB); about 2 when linear. */
  readonly ratio: number
}

const MB = 1_000_000
const DELTA = 4

const tools: ReadonlyArray<RequestTool> = [
  { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } },
  { name: "run", parameters: { type: "object", properties: { cmd: { type: "string" }, n: { type: "integer" } } } }
]
const options: Holdback.ToolTextOptions = { formats: ["xml", "mustache", "qwen3_xml", "mistral", "bare_json"], tools }

/** Prose full of near misses, with a block of each format every few hundred bytes. */
const makeText = (size: number): string => {
  const prose = "The model weighs <tools> and {{vars}} and [TOOL] notes, a < b, then <tool_c and {x} before it calls. "
  const blocks = [
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n",
    "{{tool_call}}{\"name\": \"run\", \"arguments\": \"{\\\"cmd\\\": \\\"ls -l\\\"}\"}{{/tool_call}}",
    "<TOOL_CALL>\n<function=run>\n<parameter=cmd>\nmake test\n</parameter>\n" +
    "<parameter=n>\n3\n</parameter>\n</function>\n</TOOL_CALL>",
    "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"] Oslo [\"}}]"
  ]
  const parts: Array<string> = []
  let length = 0
  for (let i = 0; length < size; i++) {
    const part = i % 4 === 3 ? blocks[(i >> 2) % blocks.length] ?? "" : prose
    parts.push(part)
    length += part.length
  }
  return parts.join("").slice(0, size)
}

const deltas = (text: string): ReadonlyArray<string> => {
  const out: Array<string> = []
  for (let i = 0; i < text.length; i += DELTA) out.push(text.slice(i, i + DELTA))
  return out
}

const run = (chunks: ReadonlyArray<string>, with_: Holdback.ToolTextOptions = options): number => {
  let state = Holdback.initial(with_)
  let count = 0
  for (const chunk of chunks) {
    const [next, out] = Holdback.append(state, chunk)
    state = next
    count += out.length
  }
  return count + Holdback.flush(state).length
}

/** Best of three timed runs after one warm-up, in milliseconds; the output count is kept so no work is elided. */
const bestOf3 = (chunks: ReadonlyArray<string>): number => {
  let sink = run(chunks)
  let best = Number.POSITIVE_INFINITY
  for (let i = 0; i < 3; i++) {
    // Under `node --expose-gc`, start each run with a clean heap so a collection owed by the last one is not billed.
    ;(globalThis as { gc?: () => void }).gc?.()
    const start = performance.now()
    sink += run(chunks)
    best = Math.min(best, performance.now() - start)
  }
  return sink < 0 ? Number.NaN : best
}

/** Prose a model writes, with the characters markers start with (`<`, `[`, `{`) but no marker. */
const PLAIN = "Sure: in TypeScript, `a < b` compares, an array is [1, 2] and an object {x: 1}; see <https://x.y>. "

/** ns per delta of both option sets, timed alternately (best of 7 each) so the machine's swings hit both alike. */
const plainFigures = (): ToolTextFigures["plain"] => {
  const chunks = deltas(PLAIN.repeat(Math.ceil(MB / PLAIN.length)).slice(0, MB))
  const all: Holdback.ToolTextOptions = { formats: TEXT_FORMATS, tools }
  run(chunks, options)
  run(chunks, all)
  let five = Number.POSITIVE_INFINITY
  let every = Number.POSITIVE_INFINITY
  for (let i = 0; i < 7; i++) {
    for (const [which, opts] of [["five", options], ["all", all]] as const) {
      ;(globalThis as { gc?: () => void }).gc?.()
      const start = performance.now()
      run(chunks, opts)
      const ms = performance.now() - start
      if (which === "five") five = Math.min(five, ms)
      else every = Math.min(every, ms)
    }
  }
  const ns = (ms: number) => (ms * 1e6) / chunks.length
  return { fiveNs: ns(five), allNs: ns(every), ratio: every / five }
}

export const measureToolTextThroughput = (): ToolTextFigures => {
  const oneMb = deltas(makeText(MB))
  const twoMb = deltas(makeText(2 * MB))
  // Warm both sizes first, so the first timing does not carry the JIT's start-up.
  run(twoMb)
  const one = bestOf3(oneMb)
  const two = bestOf3(twoMb)
  const figures = (ms: number, mb: number) => ({ seconds: ms / 1000, mbPerSec: mb / (ms / 1000) })
  return { plain: plainFigures(), mb1: figures(one, 1), mb2: figures(two, 2), ratio: two / one }
}
