/**
 * Preloaded (`node --expose-gc --import`) into the measured proxies, edge and
 * baseline alike, so the bench can force a full GC, read the heap and take a
 * heap snapshot over IPC without touching the product's code. Snapshots go to
 * `BENCH_HEAP_DIR` (default: the OS temp dir); the reply is the file's path.
 */
import { tmpdir } from "node:os"
import { join } from "node:path"
import { writeHeapSnapshot } from "node:v8"
import { answer, exitWithParent } from "./ipc.js"

const gc = (globalThis as { gc?: () => void }).gc
let snapshots = 0

if (process.send !== undefined) {
  answer({
    gc: () => {
      gc?.()
      gc?.()
      return gc !== undefined
    },
    memory: () => process.memoryUsage(),
    // Synchronous: the reply goes once the file is complete. V8 collects garbage before it walks the heap.
    heapSnapshot: () =>
      writeHeapSnapshot(join(process.env["BENCH_HEAP_DIR"] ?? tmpdir(), `iop-${process.pid}-${++snapshots}.heapsnapshot`))
  })
  exitWithParent()
}
