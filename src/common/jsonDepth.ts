/**
 * The nesting depth of a parsed JSON value, checked without recursion. `JSON.parse` builds any depth (V8's
 * parser is iterative), but most code after it recurses: `JSON.stringify`, ajv's compiler, Schema, the
 * upstream request's serialisation. A 50,000-deep array overflows their stack, so a request body's depth is
 * checked once, right after parsing, before any of them runs.
 *
 * Depth counts containers (arrays and objects) from the root: `{}` is 1 level, `{"a":[1]}` 2. Scalars add none.
 */

/** The path of a value inside a JSON document: keys and indices from the root. */
export type JsonPath = ReadonlyArray<string | number>

type Container = ReadonlyArray<unknown> | Readonly<Record<string, unknown>>

const isContainer = (u: unknown): u is Container => typeof u === "object" && u !== null

/** `Array.isArray`, narrowing a readonly array too. */
const isArray = (c: Container): c is ReadonlyArray<unknown> => Array.isArray(c)

/**
 * Whether `value` nests more than `max` containers anywhere. One pass over the containers (scalars are never
 * pushed), depth-first with one explicit stack of values and a parallel one of their depths, and no allocation
 * per node; it stops at the first container it finds past `max` (a 50,000-deep array is not walked to its end).
 */
export const exceedsDepth = (value: unknown, max: number): boolean => {
  if (!isContainer(value)) return false
  if (max < 1) return true
  const values: Array<Container> = [value]
  const depths: Array<number> = [1]
  for (let node = values.pop(); node !== undefined; node = values.pop()) {
    // The depth of the node's children.
    const depth = (depths.pop() ?? 0) + 1
    if (isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const child: unknown = node[i]
        if (!isContainer(child)) continue
        if (depth > max) return true
        values.push(child)
        depths.push(depth)
      }
    } else {
      // A parsed object's keys are its own (JSON.parse gives plain objects; `__proto__` is an own key there).
      for (const key in node) {
        const child = node[key]
        if (!isContainer(child)) continue
        if (depth > max) return true
        values.push(child)
        depths.push(depth)
      }
    }
  }
  return false
}

interface Frame {
  readonly value: Container
  readonly depth: number
  readonly parent: Frame | undefined
  readonly key: string | number
}

const pathOf = (frame: Frame): JsonPath => {
  const path: Array<string | number> = []
  for (let f: Frame | undefined = frame; f?.parent !== undefined; f = f.parent) path.push(f.key)
  return path.reverse()
}

/**
 * The path of the first container (in document order) that is `max + 1` levels deep, or `undefined` when the
 * value is within `max`. The common case costs `exceedsDepth` only; the path is looked for (allocating a frame
 * per container above the limit) only for a body that is refused.
 */
export const depthExceededAt = (value: unknown, max: number): JsonPath | undefined => {
  if (!exceedsDepth(value, max) || !isContainer(value)) return undefined
  const stack: Array<Frame> = [{ value, depth: 1, parent: undefined, key: "" }]
  for (let frame = stack.pop(); frame !== undefined; frame = stack.pop()) {
    if (frame.depth > max) return pathOf(frame)
    const node = frame.value
    const entries: ReadonlyArray<readonly [string | number, unknown]> = isArray(node)
      ? node.map((child, i) => [i, child] as const)
      : Object.entries(node)
    // Pushed last to first, so that the first child is looked at first.
    for (const [key, child] of entries.slice().reverse()) {
      if (isContainer(child)) stack.push({ value: child, depth: frame.depth + 1, parent: frame, key })
    }
  }
  return undefined
}
