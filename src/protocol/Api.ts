/** An API the edge speaks: the `api` label of metrics, logs and runs. */
export type Api = "chat_completions" | "responses" | "messages"
