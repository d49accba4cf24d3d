/**
 * Splits text into small tokens the way a BPE tokenizer roughly would: a word
 * with its leading space, runs of punctuation, newlines on their own, and long
 * words in pieces of at most four characters.
 */
export const echoTokens = (text: string): ReadonlyArray<string> => {
  const out: Array<string> = []
  for (const m of text.matchAll(/\n|[ \t]*[\p{L}\p{N}_]+|[ \t]*[^\s\p{L}\p{N}_]+|[ \t]+/gu)) {
    const piece = m[0]
    if (piece.length <= 5) out.push(piece)
    else for (let i = 0; i < piece.length; i += 4) out.push(piece.slice(i, i + 4))
  }
  return out
}
