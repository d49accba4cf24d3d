/** Server-sent event framing (pure). */

export const frame = (json: unknown): string => `data: ${JSON.stringify(json)}\n\n`

export const DONE = "data: [DONE]\n\n"
