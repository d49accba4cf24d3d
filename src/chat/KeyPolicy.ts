/** What the caller's API key allows: checked at the door (`Gateway`), whoever calls (HTTP or code). */

/** What a matched key may do; `id` names it in logs and limits (never the key itself). */
export interface KeyPolicy {
  readonly id: string
  readonly models: ReadonlyArray<string> | undefined
  readonly maxConcurrentRuns: number | undefined
}

export type KeyCheck =
  | { readonly _tag: "Open" }
  | { readonly _tag: "Granted"; readonly key: KeyPolicy }
  /** `missing`: no bearer key was presented at all; `incorrect`: one was, and it matches no key. */
  | { readonly _tag: "Denied"; readonly reason: "missing" | "incorrect" }

/** The key a check granted, whose policy applies (none when the edge has no keys). */
export const grantedKey = (check: KeyCheck): KeyPolicy | undefined => (check._tag === "Granted" ? check.key : undefined)

/** Whether a key (none: no key policy) may use a model, named by its id or by the alias the caller used. */
export const allows = (key: KeyPolicy | undefined, model: string, alias?: string): boolean =>
  key === undefined || key.models === undefined || key.models.includes(model) ||
  (alias !== undefined && key.models.includes(alias))
