/**
 * `toolCallGrammar` behind a small LRU, one per provider: compiling a request's grammar costs ~0.1 ms for one strict
 * tool and ~2 ms for an agent's twenty, while an agent sends the same tools turn after turn. Keyed by the tools,
 * `tool_choice` and `parallel_tool_calls` as JSON (~5–70 µs).
 */
import { toolCallGrammar, type ToolCallGrammar, type ToolCallGrammarRequest } from "../constraints/toolCallGrammar.js"

export const GRAMMAR_CACHE_ENTRIES = 32

export const makeGrammarCache = (
  entries: number = GRAMMAR_CACHE_ENTRIES,
  compile: (request: ToolCallGrammarRequest) => ToolCallGrammar = toolCallGrammar
): ((request: ToolCallGrammarRequest) => ToolCallGrammar) => {
  // A Map iterates in insertion order: the first key is the least recently used.
  const cache = new Map<string, ToolCallGrammar>()
  return (request) => {
    const key = JSON.stringify([request.tools, request.toolChoice ?? null, request.parallelToolCalls ?? null])
    const hit = cache.get(key)
    if (hit !== undefined) {
      cache.delete(key)
      cache.set(key, hit)
      return hit
    }
    const compiled = compile(request)
    cache.set(key, compiled)
    if (cache.size > entries) {
      const oldest = cache.keys().next()
      if (oldest.done !== true) cache.delete(oldest.value)
    }
    return compiled
  }
}
