/** `GET /v1/models` in OpenAI's shape (Chat Completions and Responses callers). */
export const openAiModelList = (names: ReadonlyArray<string>) => ({
  object: "list",
  data: names.map((id) => ({ id, object: "model", created: 0, owned_by: "iop" }))
})
