import type { PrefixBlocks } from "./prefix.js"

/**
 * Which nodes recently served which prompt prefixes: a block hash (`prefix.ts`, chained, so one hash stands for
 * the whole prefix up to it) → the nodes that were sent it, most recent first, at most `HOLDERS`. Bounded: past
 * `capacity` blocks the least recently sent one is forgotten (a `Map` keeps insertion order; sending a block again
 * moves it to the end). About 150 bytes a block (the key, its entry and its holders array; node ids are shared),
 * so the default 32,768 blocks take about 5 MB, whatever the traffic.
 *
 * Plain mutable data, owned by the registry, read and written synchronously.
 */
export interface AffinityIndex {
  /**
   * How deep each node's match goes: for every node holding some block of `blocks`, the number of leading blocks it
   * was sent (the longest matching prefix), found from the deepest block down. Stops once `wanted` nodes are found.
   */
  readonly matches: (blocks: PrefixBlocks, wanted: number) => ReadonlyMap<string, number>
  /** `node` was sent these blocks: each is moved to the most recent end, with `node` first among its holders. */
  readonly record: (blocks: PrefixBlocks, node: string) => void
  readonly size: () => number
}

/** Nodes remembered per block: enough for a prefix every replica of a small pool has (a shared system prompt). */
export const HOLDERS = 4

export const DEFAULT_INDEX_BLOCKS = 32_768

export const makeAffinityIndex = (capacity: number = DEFAULT_INDEX_BLOCKS): AffinityIndex => {
  const blocks = new Map<number, Array<string>>()

  const matches = (prefix: PrefixBlocks, wanted: number): ReadonlyMap<string, number> => {
    const found = new Map<string, number>()
    for (let i = prefix.length - 1; i >= 0 && found.size < wanted; i--) {
      const holders = blocks.get(prefix[i]!)
      if (holders === undefined) continue
      for (const node of holders) if (!found.has(node)) found.set(node, i + 1)
    }
    return found
  }

  const record = (prefix: PrefixBlocks, node: string): void => {
    for (const block of prefix) {
      const holders = blocks.get(block)
      if (holders === undefined) {
        blocks.set(block, [node])
        continue
      }
      blocks.delete(block)
      const at = holders.indexOf(node)
      if (at !== 0) {
        if (at > 0) holders.splice(at, 1)
        holders.unshift(node)
        if (holders.length > HOLDERS) holders.length = HOLDERS
      }
      blocks.set(block, holders)
    }
    if (blocks.size <= capacity) return
    for (const oldest of blocks.keys()) {
      if (blocks.size <= capacity) break
      blocks.delete(oldest)
    }
  }

  return { matches, record, size: () => blocks.size }
}
