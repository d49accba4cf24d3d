/** Throughput of the reasoning filters on streamed content, and whether their cost grows linearly with its size. */
import * as Sentinel from "../src/chat/filters/sentinel.js"
import * as Think from "../src/chat/filters/think.js"

export interface ReasoningFiltersFigures {
  readonly sentinel: { readonly mbPerSec: number }
  readonly think: { readonly mbPerSec: number }
  /** time(2 MB) / time(1 MB) through sentinel → think; about 2 when linear. */
  readonly ratio2to1: number
}

const MB = 1_000_000
const DELTA = 4

/** A think block (a quarter of the text), then prose, then an end token and template garbage. */
const makeText = (size: number): string => {
  const line = "The quick brown fox considers <b>tags</b> and </thought> before it jumps. "
  const reasoning = line.repeat(Math.ceil(size / 4 / line.length))
  const prose = "Answer: a < b, and x </s or y <|im_start. ".repeat(Math.ceil((size * 3) / 4 / 42))
  return (`<think>\n${reasoning}</think>\n\n${prose}`).slice(0, size - 20) + "<|im_end|>\n<|im_start|>"
}

const deltas = (text: string): ReadonlyArray<string> => {
  const out: Array<string> = []
  for (let i = 0; i < text.length; i += DELTA) out.push(text.slice(i, i + DELTA))
  return out
}

const runSentinel = (chunks: ReadonlyArray<string>): number => {
  let state = Sentinel.initial(Sentinel.DEFAULT_SENTINELS)
  let length = 0
  for (const chunk of chunks) {
    const [next, out] = Sentinel.append(state, chunk)
    state = next
    length += out.length
  }
  return length + Sentinel.flush(state).length
}

const runThink = (chunks: ReadonlyArray<string>): number => {
  let state = Think.initial({ implicitOpen: false })
  let length = 0
  for (const chunk of chunks) {
    const [next, out] = Think.append(state, chunk)
    state = next
    length += out.content.length + out.reasoning.length
  }
  const last = Think.flush(state)
  return length + last.content.length + last.reasoning.length
}

const runBoth = (chunks: ReadonlyArray<string>): number => {
  let sentinel = Sentinel.initial(Sentinel.DEFAULT_SENTINELS)
  let think = Think.initial({ implicitOpen: false })
  let length = 0
  for (const chunk of chunks) {
    const [nextSentinel, text] = Sentinel.append(sentinel, chunk)
    const [nextThink, out] = Think.append(think, text)
    sentinel = nextSentinel
    think = nextThink
    length += out.content.length + out.reasoning.length
  }
  const [, out] = Think.append(think, Sentinel.flush(sentinel))
  return length + out.content.length + out.reasoning.length
}

/** Best of three timed runs after one warm-up, in milliseconds; the output length is kept so no work is elided. */
const bestOf3 = (run: (chunks: ReadonlyArray<string>) => number, chunks: ReadonlyArray<string>): number => {
  let sink = run(chunks)
  let best = Number.POSITIVE_INFINITY
  for (let i = 0; i < 3; i++) {
    const start = performance.now()
    sink += run(chunks)
    best = Math.min(best, performance.now() - start)
  }
  return sink < 0 ? Number.NaN : best
}

export const measureReasoningFilters = (): ReasoningFiltersFigures => {
  const one = deltas(makeText(MB))
  const two = deltas(makeText(2 * MB))
  const mbPerSec = (ms: number) => 1000 / ms
  return {
    sentinel: { mbPerSec: mbPerSec(bestOf3(runSentinel, one)) },
    think: { mbPerSec: mbPerSec(bestOf3(runThink, one)) },
    ratio2to1: bestOf3(runBoth, two) / bestOf3(runBoth, one)
  }
}
