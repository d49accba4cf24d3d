/**
 * Bounds for text built from outside input (error reasons, log fields): a clipped text keeps its start and ends
 * with a marker naming how much was left off. PURE.
 */

/** The end of a clipped text: how many UTF-16 code units were left off. */
export const clipMarker = (dropped: number): string => `…(+${dropped} chars)`

const isHigh = (c: number): boolean => c >= 0xd800 && c <= 0xdbff
const isLow = (c: number): boolean => c >= 0xdc00 && c <= 0xdfff

/** `at`, or one less where `at` would split a surrogate pair. */
const cutAt = (text: string, at: number): number =>
  at > 0 && at < text.length && isHigh(text.charCodeAt(at - 1)) && isLow(text.charCodeAt(at)) ? at - 1 : at

const limitOf = (max: number): number => (Number.isFinite(max) ? Math.max(0, Math.floor(max)) : 0)

/**
 * `text` when it has at most `max` UTF-16 code units, else its start and a marker, `max` code units at most (when
 * `max` is too small for a marker, the start alone). Never splits a surrogate pair. The marker counts what was
 * left off (`clipMarker`); `"ellipsis"` is a bare `…`, for a few words inside a one-line message (a Schema
 * issue's path and text, an upstream's error message).
 */
export const clip = (text: string, max: number, marker: "counted" | "ellipsis" = "counted"): string => {
  const limit = limitOf(max)
  if (text.length <= limit) return text
  // The longest marker this text can need: fewer units left off take no more digits.
  const room = limit - (marker === "ellipsis" ? 1 : clipMarker(text.length).length)
  if (room < 0) return text.slice(0, cutAt(text, limit))
  const end = cutAt(text, room)
  return text.slice(0, end) + (marker === "ellipsis" ? "…" : clipMarker(text.length - end))
}

/** JSON of a value for a message: `JSON.stringify` where it can, else `String`; never throws. */
export const jsonText = (value: unknown): string => {
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

/** A short excerpt of a value (its JSON, clipped to `max`). */
export const excerpt = (value: unknown, max: number): string => clip(jsonText(value), max)

/**
 * `parts` joined by `separator`, at most `maxParts` of them (then `…(+K more)`), the whole clipped to `max`. Reads
 * only the parts it keeps, each clipped first, so a huge part or a huge count costs no more than `max`.
 */
export const clipJoin = (parts: ReadonlyArray<string>, separator: string, maxParts: number, max: number): string => {
  const kept = parts.slice(0, limitOf(maxParts)).map((p) => clip(p, max))
  const more = parts.length - kept.length
  const joined = kept.join(separator)
  return clip(more > 0 ? `${joined}${kept.length > 0 ? separator : ""}…(+${more} more)` : joined, max)
}

/** UTF-8 bytes of code unit `i` of `text` (with the next unit when they are a pair) inside a JSON string. */
const jsonUnitBytes = (text: string, i: number): number => {
  const c = text.charCodeAt(i)
  if (c === 0x22 || c === 0x5c) return 2
  if (c < 0x20) return c === 0x08 || c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d ? 2 : 6
  if (c < 0x80) return 1
  if (c < 0x800) return 2
  if (isHigh(c)) return i + 1 < text.length && isLow(text.charCodeAt(i + 1)) ? 4 : 6
  if (isLow(c)) return 6 // a lone low surrogate (a pair's low half is counted with its high half)
  return 3
}

const unitsAt = (text: string, i: number): number =>
  isHigh(text.charCodeAt(i)) && i + 1 < text.length && isLow(text.charCodeAt(i + 1)) ? 2 : 1

/** The UTF-8 bytes of `JSON.stringify(text)`, its quotes included. */
export const jsonStringBytes = (text: string): number => {
  let bytes = 2
  for (let i = 0; i < text.length; i += unitsAt(text, i)) bytes += jsonUnitBytes(text, i)
  return bytes
}

/** How many code units of `text`, from its start, fit in `budget` bytes of JSON string content. */
const fitting = (text: string, budget: number): number => {
  let bytes = 0
  let i = 0
  while (i < text.length) {
    const cost = jsonUnitBytes(text, i)
    if (bytes + cost > budget) break
    bytes += cost
    i += unitsAt(text, i)
  }
  return i
}

/**
 * `text` clipped so that `JSON.stringify` of it takes at most `maxBytes` UTF-8 bytes, quotes and escapes included
 * (`maxBytes` below 2 is read as 2: the empty string). Reads at most about `maxBytes` code units of a longer text.
 */
export const clipJsonString = (text: string, maxBytes: number): string => {
  const limit = Math.max(2, limitOf(maxBytes))
  // Every code unit takes at least one byte and at most six.
  if (text.length * 6 + 2 <= limit) return text
  if (text.length + 2 <= limit && jsonStringBytes(text) <= limit) return text
  const room = limit - jsonStringBytes(clipMarker(text.length))
  if (room < 0) return text.slice(0, fitting(text, limit - 2))
  const end = fitting(text, room)
  return text.slice(0, end) + clipMarker(text.length - end)
}

/** The UTF-8 bytes of a string. */
export const utf8Bytes = (text: string): number => {
  let bytes = 0
  for (let i = 0; i < text.length; i += unitsAt(text, i)) {
    const c = text.charCodeAt(i)
    bytes += c < 0x80 ? 1 : c < 0x800 ? 2 : unitsAt(text, i) === 2 ? 4 : 3
  }
  return bytes
}
