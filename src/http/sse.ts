/** Server-sent event framing (pure). */

export const frame = (json: unknown): string => `data: ${JSON.stringify(json)}\n\n`

export const DONE = "data: [DONE]\n\n"

export const comment = (text: string): string => `: ${text.replace(/[\r\n]+/g, " ")}\n\n`
