#!/usr/bin/env node
// Turns one request of a recorder log into a fixture: {method, path, query, headers, body}, with every string longer
// than LIMIT chars cut to LIMIT and marked `…[clipped from N chars]`. Every field, array entry and `tools` entry stays.
//
//   node test/agents/clip.mjs requests.jsonl SEQ [LIMIT=1500] > fixture.json
import { readFileSync } from "node:fs"

const [file, seqArg, limitArg] = process.argv.slice(2)
if (!file || !seqArg) {
  process.stderr.write("usage: clip.mjs requests.jsonl SEQ [LIMIT]\n")
  process.exit(2)
}
const LIMIT = Number(limitArg ?? 1500)
const rec = readFileSync(file, "utf8")
  .split("\n")
  .filter(Boolean)
  .map((l) => JSON.parse(l))
  .find((r) => r.seq === Number(seqArg))
if (!rec) {
  process.stderr.write(`no request with seq ${seqArg}\n`)
  process.exit(1)
}

const clip = (v) => {
  if (typeof v === "string") return v.length > LIMIT ? `${v.slice(0, LIMIT)}…[clipped from ${v.length} chars]` : v
  if (Array.isArray(v)) return v.map(clip)
  if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, clip(x)]))
  return v
}
const { method, path, query, headers, body_bytes, body } = rec
process.stdout.write(JSON.stringify({ method, path, query, headers, body_bytes, body: clip(body) }, null, 2) + "\n")
