import { defineConfig } from "vitest/config"

// `npm run test:realup` only (the root vitest.config.ts excludes test/realup): the text tool-call families through a
// real llama-server that globalSetup.ts starts (scripts/realup/start.sh; setup.sh built it). The timeouts are hang
// guards only.
export default defineConfig({
  test: {
    root: new URL("../..", import.meta.url).pathname,
    include: ["test/realup/**/*.test.ts"],
    globalSetup: ["test/realup/globalSetup.ts"],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: "forks",
    fileParallelism: false,
    // As many requests at once as the server has slots (REALUP_SLOTS, 4).
    maxConcurrency: 4
  }
})
