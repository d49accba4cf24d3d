/**
 * Preloaded (`node --expose-gc --import`) into the measured proxies, edge and
 * baseline alike, so the bench can force a full GC and read the heap over IPC
 * without touching the product's code.
 */
import { answer, exitWithParent } from "./ipc.js"

const gc = (globalThis as { gc?: () => void }).gc

if (process.send !== undefined) {
  answer({
    gc: () => {
      gc?.()
      gc?.()
      return gc !== undefined
    },
    memory: () => process.memoryUsage()
  })
  exitWithParent()
}
