/** The bench's IPC protocol between the main process and its children: `{ id, type }` asks, `{ id, reply }` answers. */

export interface Ask {
  readonly id: number
  readonly type: string
}

export interface Reply {
  readonly id: number
  readonly reply: unknown
}

export interface Listening {
  readonly type: "listening"
  readonly port: number
}

export const isAsk = (u: unknown): u is Ask =>
  typeof u === "object" && u !== null && typeof (u as Ask).id === "number" && typeof (u as Ask).type === "string"

export const isReply = (u: unknown): u is Reply =>
  typeof u === "object" && u !== null && typeof (u as Reply).id === "number" && "reply" in u

export const isListening = (u: unknown): u is Listening =>
  typeof u === "object" && u !== null && (u as Listening).type === "listening" && typeof (u as Listening).port === "number"

/** In a child: answer the parent's asks of the given types; other types are left to other handlers. */
export const answer = (handlers: Readonly<Record<string, () => unknown>>): void => {
  process.on("message", (message: unknown) => {
    if (!isAsk(message)) return
    const handler = handlers[message.type]
    if (handler !== undefined) process.send?.({ id: message.id, reply: handler() })
  })
}

/** In a child: the parent went away, so go too (no orphans if the bench dies). */
export const exitWithParent = (): void => {
  process.on("disconnect", () => process.exit(0))
}
