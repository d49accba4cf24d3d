/** The fake upstream's words (bench/upstream.ts), shared with the clients that check a non-stream answer's text. */

export const WORDS = [" The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ",", " and", " then", " it", " naps", " \"zz\"", " café"]

export const token = (i: number): string => WORDS[i % WORDS.length] ?? ""

/** The content of a `tokens`-token answer: what a streamed answer's deltas join to, and a non-stream answer's message. */
export const completionText = (tokens: number): string => Array.from({ length: tokens }, (_, i) => token(i)).join("")
