import { defineConfig } from "vitest/config"

// `npm run test:agents` only (root vitest.config.ts excludes test/agents): the agents' cases, each a few seconds of
// processes in a network namespace, started by agents.test.ts itself (AGENTS_CONCURRENCY at a time).
export default defineConfig({
  test: {
    root: new URL("../..", import.meta.url).pathname,
    include: ["test/agents/**/*.test.ts"],
    testTimeout: 180_000,
    hookTimeout: 180_000,
    pool: "forks",
    fileParallelism: false
  }
})
