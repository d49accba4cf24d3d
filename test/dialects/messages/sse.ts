/** Anthropic SSE text → its events (`event:` name and parsed `data:`), for the renderer's and the clients' tests. */

export interface SseEvent {
  readonly event: string
  readonly data: Record<string, unknown>
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

export const parseEvents = (text: string): Array<SseEvent> => {
  const out: Array<SseEvent> = []
  for (const frame of text.split("\n\n")) {
    if (frame === "") continue
    const lines = frame.split("\n")
    const event = lines.find((l) => l.startsWith("event: "))?.slice(7) ?? ""
    const data = lines.filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n")
    const parsed: unknown = JSON.parse(data)
    if (!isRecord(parsed)) throw new Error(`event data is not an object: ${data}`)
    out.push({ event, data: parsed })
  }
  return out
}

export const field = (u: unknown, ...path: ReadonlyArray<string>): unknown => {
  let at = u
  for (const key of path) at = isRecord(at) ? at[key] : undefined
  return at
}
