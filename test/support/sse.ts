/** A Chat Completions SSE body, parsed for assertions: its chunks, its error event, its `[DONE]`. */
export type StreamItem =
  | { readonly _tag: "Chunk"; readonly chunk: unknown }
  | { readonly _tag: "Error"; readonly error: { readonly type: string; readonly message: string } }
  | { readonly _tag: "Done" }

export const parseSse = (text: string): ReadonlyArray<StreamItem> =>
  text
    .split("\n\n")
    .filter((frame) => frame.startsWith("data: "))
    .map((frame): StreamItem => {
      const data = frame.slice("data: ".length)
      if (data === "[DONE]") return { _tag: "Done" }
      const json: unknown = JSON.parse(data)
      if (typeof json === "object" && json !== null && "error" in json) {
        const error = json.error as { type: string; message: string }
        return { _tag: "Error", error }
      }
      return { _tag: "Chunk", chunk: json }
    })
