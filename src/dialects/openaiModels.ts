/** One model in OpenAI's shape (`GET /v1/models/{id}`, and each entry of the list). */
export const openAiModel = (id: string) => ({ id, object: "model", created: 0, owned_by: "iop" })

/** `GET /v1/models` in OpenAI's shape (Chat Completions and Responses callers). */
export const openAiModelList = (names: ReadonlyArray<string>) => ({
  object: "list",
  data: names.map(openAiModel)
})
