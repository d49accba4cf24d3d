import { availableParallelism } from "node:os"
import { defineConfig } from "vitest/config"

// Measured on the 2-core machine (full suite, alternating runs): one worker, vitest's default there, took 164–192 s;
// two took 132–156 s for the same CPU time, since the end-to-end files wait on their processes. `isolate: false`
// loads the modules (Effect, the edge) once per worker instead of once per file: 110 instead of 164 CPU seconds.
// The threads pool was no faster than forks, and forks keep process-wide state (signals, `exit`) per worker.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The coding agents' end-to-end cases need root, ~700 MB of agents and a build: `npm run test:agents`.
    // The families through a real llama.cpp server: `npm run test:realup`.
    exclude: ["test/agents/**", "test/realup/**", "**/node_modules/**"],
    // Hang guards only: no test waits against the clock (README, "Development").
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
    maxWorkers: Math.max(2, availableParallelism()),
    minWorkers: 1,
    isolate: false,
    // Runs before every test file (the module graph is shared): its afterAll cleans up the processes of the file.
    setupFiles: ["test/support/edgeProcess.ts"]
  }
})
