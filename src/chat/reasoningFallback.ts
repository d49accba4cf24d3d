/** Visible content for a non-strict run that produced only reasoning, so a completion is never empty. */

export const HIDDEN_REASONING_CONTENT = "[The model produced only hidden reasoning and no answer.]"
export const REASONING_OUT_OF_TOKENS_CONTENT = "[The model ran out of tokens while reasoning and gave no answer.]"

export const reasoningOnlyContent = (options: {
  readonly reasoning: string
  readonly finishReason: string
  readonly exposeReasoning: boolean
}): string => {
  const note = options.finishReason === "length" ? REASONING_OUT_OF_TOKENS_CONTENT : HIDDEN_REASONING_CONTENT
  const reasoning = options.reasoning.trim()
  if (!options.exposeReasoning || reasoning === "") return note
  // A caller who sees the reasoning still learns that it was cut short rather than finished.
  return options.finishReason === "length" ? `${reasoning}\n\n${REASONING_OUT_OF_TOKENS_CONTENT}` : reasoning
}
