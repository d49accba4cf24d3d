/**
 * The constraint's CPU cost at the edge (issue 21): compiling a request's answer grammar from its tools
 * (`toolCallGrammar`, a pure function the OpenAI provider calls once per constrained request and once per
 * constrained replay), for a strict `book_flight` tool and for a 20-tool agent's set. `npm run bench` shows it
 * beside the non-stream request's CPU measured in the same run; `node dist-bench/bench/constraints.js` (after
 * `tsc -p tsconfig.bench.json`) measures it alone.
 */
import { pathToFileURL } from "node:url"
import {
  type GrammarTool,
  type GrammarToolChoice,
  toolCallGrammar,
  type ToolCallGrammarRequest
} from "../src/providers/constraints/toolCallGrammar.js"
import { fixed, table } from "./table.js"

export interface ConstraintCompileRow {
  readonly name: string
  readonly tools: number
  readonly choice: string
  /** CPU per compile (one request), best of the timed runs. */
  readonly usPerRequest: number
  /** The grammar's UTF-8 bytes and llama.cpp rules; `TooLarge` or no grammar leaves them NaN. */
  readonly bytes: number
  readonly rules: number
  /** Schema parts the grammar leaves to validation. */
  readonly unconstrained: number
  readonly outcome: string
}

export interface ConstraintFigures {
  readonly rows: ReadonlyArray<ConstraintCompileRow>
}

/** Strict, as in issue 21's table and test/realup/constrained.test.ts: two patterns, an enum, an integer 1–9. */
const BOOK_FLIGHT: GrammarTool = {
  function: {
    name: "book_flight",
    parameters: {
      type: "object",
      properties: {
        from: { type: "string", pattern: "^[A-Z]{3}$", description: "IATA code of the departure airport" },
        to: { type: "string", pattern: "^[A-Z]{3}$", description: "IATA code of the arrival airport" },
        cabin: { enum: ["economy", "business", "first"] },
        passengers: { type: "integer", minimum: 1, maximum: 9 },
        date: { type: "string", format: "date" }
      },
      required: ["from", "to", "cabin", "passengers"],
      additionalProperties: false
    }
  }
}

const str = (description: string, extra: Record<string, unknown> = {}) => ({ type: "string", description, ...extra })
const obj = (properties: Record<string, unknown>, required: ReadonlyArray<string>) =>
  ({ type: "object", properties, required, additionalProperties: false })
/** A tool as a request carries it (its description too, which the grammar does not need). */
interface AgentTool {
  readonly function: { readonly name: string; readonly description: string; readonly parameters: Record<string, unknown> }
}
const tool = (name: string, description: string, parameters: Record<string, unknown>): AgentTool => ({
  function: { name, description, parameters }
})

/** A coding agent's tools (shell, files, search, edits, tasks, web, notebook): descriptions, nested objects, arrays. */
const AGENT: ReadonlyArray<AgentTool> = [
  tool("bash", "Run a shell command in the workspace and return its output.", obj({
    command: str("The command line"),
    timeout_ms: { type: "integer", minimum: 1, maximum: 600_000 },
    run_in_background: { type: "boolean" }
  }, ["command"])),
  tool("read_file", "Read a file, or lines of it.", obj({
    path: str("Absolute path"),
    offset: { type: "integer", minimum: 0 },
    limit: { type: "integer", minimum: 1, maximum: 2000 }
  }, ["path"])),
  tool("write_file", "Create or overwrite a file.", obj({
    path: str("Absolute path"),
    content: str("The whole content")
  }, ["path", "content"])),
  tool("edit_file", "Replace exact text in a file, once or everywhere.", obj({
    path: str("Absolute path"),
    edits: {
      type: "array",
      minItems: 1,
      items: obj({
        old_text: str("Text to find"),
        new_text: str("Its replacement"),
        replace_all: { type: "boolean" }
      }, ["old_text", "new_text"])
    }
  }, ["path", "edits"])),
  tool("glob", "Find files by pattern.", obj({ pattern: str("A glob such as src/**/*.ts"), path: str("Where") }, ["pattern"])),
  tool("grep", "Search file contents with a regular expression.", obj({
    pattern: str("The regular expression"),
    path: str("File or directory"),
    glob: str("Only files matching"),
    output_mode: { enum: ["content", "files_with_matches", "count"] },
    context: { type: "integer", minimum: 0, maximum: 20 },
    case_insensitive: { type: "boolean" }
  }, ["pattern"])),
  tool("list_dir", "List a directory.", obj({
    path: str("Absolute path"),
    ignore: { type: "array", items: { type: "string" } }
  }, ["path"])),
  tool("todo_write", "Replace the task list.", obj({
    todos: {
      type: "array",
      items: obj({
        id: str("Stable id"),
        content: str("What to do", { minLength: 1 }),
        status: { enum: ["pending", "in_progress", "completed"] },
        priority: { enum: ["high", "medium", "low"] }
      }, ["id", "content", "status"])
    }
  }, ["todos"])),
  tool("web_fetch", "Fetch a URL and answer a question about it.", obj({
    url: str("The URL", { pattern: "^https?://" }),
    prompt: str("What to extract")
  }, ["url", "prompt"])),
  tool("web_search", "Search the web.", obj({
    query: str("The query", { minLength: 2 }),
    allowed_domains: { type: "array", items: { type: "string" } },
    blocked_domains: { type: "array", items: { type: "string" } }
  }, ["query"])),
  tool("notebook_edit", "Edit a cell of a Jupyter notebook.", obj({
    notebook_path: str("Absolute path"),
    cell_id: str("The cell"),
    new_source: str("The cell's new source"),
    cell_type: { enum: ["code", "markdown"] },
    edit_mode: { enum: ["replace", "insert", "delete"] }
  }, ["notebook_path", "new_source"])),
  tool("run_tests", "Run the test suite or some of it.", obj({
    files: { type: "array", items: { type: "string" }, maxItems: 50 },
    filter: str("Only tests whose name matches"),
    options: obj({
      coverage: { type: "boolean" },
      bail: { type: "integer", minimum: 0 },
      env: { type: "object", additionalProperties: { type: "string" } }
    }, [])
  }, [])),
  tool("git", "Run a git subcommand.", obj({
    subcommand: { enum: ["status", "diff", "log", "add", "commit", "checkout", "branch"] },
    args: { type: "array", items: { type: "string" } }
  }, ["subcommand"])),
  tool("ask_user", "Ask the user a question with choices.", obj({
    question: str("The question"),
    options: {
      type: "array",
      minItems: 2,
      maxItems: 4,
      items: obj({ label: str("Short label"), description: str("What it means") }, ["label"])
    }
  }, ["question", "options"])),
  tool("task", "Start a sub-agent on a task.", obj({
    description: str("Three to five words"),
    prompt: str("The task"),
    agent: { enum: ["general", "explore", "plan"] }
  }, ["description", "prompt"])),
  tool("http_request", "Send an HTTP request.", obj({
    method: { enum: ["GET", "POST", "PUT", "PATCH", "DELETE"] },
    url: str("The URL"),
    headers: { type: "array", items: obj({ name: str("Header"), value: str("Value") }, ["name", "value"]) },
    body: { type: ["string", "null"] }
  }, ["method", "url"])),
  tool("sql_query", "Run a read-only SQL query.", obj({
    query: str("SELECT …", { maxLength: 4000 }),
    params: { type: "array", items: { type: ["string", "number", "boolean", "null"] } },
    limit: { type: "integer", minimum: 1, maximum: 1000 }
  }, ["query"])),
  tool("create_issue", "File an issue in the tracker.", obj({
    title: str("Title", { minLength: 5, maxLength: 120 }),
    body: str("Markdown body"),
    labels: { type: "array", items: { enum: ["bug", "feature", "docs", "question"] }, uniqueItems: true },
    assignee: { type: ["string", "null"] }
  }, ["title"])),
  tool("schedule", "Schedule a reminder.", obj({
    at: str("When", { format: "date-time" }),
    repeat: obj({
      every: { type: "integer", minimum: 1 },
      unit: { enum: ["minute", "hour", "day", "week"] }
    }, ["every", "unit"]),
    note: str("What to remind")
  }, ["at", "note"])),
  tool("get_weather", "The weather in a city.", obj({
    city: str("City name"),
    unit: { enum: ["celsius", "fahrenheit"] },
    days: { type: "integer", minimum: 1, maximum: 14 }
  }, ["city"]))
]

interface Case {
  readonly name: string
  readonly request: ToolCallGrammarRequest
  readonly choice: string
}

const CASES: ReadonlyArray<Case> = [
  { name: "book_flight (strict)", choice: "auto", request: { tools: [BOOK_FLIGHT] } },
  {
    name: "book_flight (strict)",
    choice: "required, one call",
    request: { tools: [BOOK_FLIGHT], toolChoice: "required", parallelToolCalls: false }
  },
  { name: "20-tool agent", choice: "auto", request: { tools: AGENT } },
  {
    name: "20-tool agent",
    choice: "named (edit_file)",
    request: { tools: AGENT, toolChoice: { function: { name: "edit_file" } } satisfies GrammarToolChoice }
  }
]

const gc = () => (globalThis as { gc?: () => void }).gc?.()

/** µs per compile: best of 7 timed runs of `n` compiles, `n` sized for ~50 ms a run after a warm-up. */
const timeCompile = (request: ToolCallGrammarRequest): number => {
  let sink = 0
  const run = (n: number): number => {
    const start = performance.now()
    for (let i = 0; i < n; i++) {
      const g = toolCallGrammar(request)
      sink += g._tag === "Grammar" ? g.bytes : 1
    }
    return performance.now() - start
  }
  run(50)
  const once = Math.max(run(20) / 20, 0.001)
  const n = Math.max(20, Math.round(50 / once))
  let best = Number.POSITIVE_INFINITY
  for (let i = 0; i < 7; i++) {
    // Start each run on a clean heap (under `node --expose-gc`), so a collection owed by the last is not billed.
    gc()
    best = Math.min(best, run(n) / n)
  }
  return sink < 0 ? Number.NaN : best * 1000
}

export const measureConstraintCompile = (): ConstraintFigures => ({
  rows: CASES.map(({ name, request, choice }) => {
    const g = toolCallGrammar(request)
    return {
      name,
      tools: request.tools.length,
      choice,
      usPerRequest: timeCompile(request),
      bytes: g._tag === "Grammar" ? g.bytes : Number.NaN,
      rules: g._tag === "Grammar" ? g.rules : Number.NaN,
      unconstrained: g._tag === "Grammar" ? g.unconstrained.length : Number.NaN,
      outcome: g._tag
    }
  })
})

/**
 * The table: each compile's µs, and (given the edge's CPU ms per non-stream request from the same run) what share
 * of such a request it adds.
 */
export const constraintTable = (figures: ConstraintFigures, nonStreamCpuMs: number): string =>
  table(
    [
      "answer grammar",
      "tool_choice",
      "tools",
      "µs/request",
      "÷ non-stream request CPU",
      "grammar bytes",
      "rules",
      "left to validation",
      "compiled"
    ],
    figures.rows.map((r) => [
      r.name,
      r.choice,
      String(r.tools),
      fixed(r.usPerRequest, 1),
      Number.isFinite(nonStreamCpuMs) ? `${fixed((100 * r.usPerRequest) / 1000 / nonStreamCpuMs, 1)} %` : "",
      fixed(r.bytes, 0),
      fixed(r.rules, 0),
      fixed(r.unconstrained, 0),
      r.outcome
    ])
  )

/** What makes the figures untrustworthy: a case that compiled to no grammar (the bench would time the wrong thing). */
export const constraintProblems = (figures: ConstraintFigures): ReadonlyArray<string> =>
  figures.rows.flatMap((r) =>
    r.outcome === "Grammar" && Number.isFinite(r.usPerRequest) ? [] : [`constraint compile ${r.name} ${r.choice}: ${r.outcome}`]
  )

// Alone: `tsc -p tsconfig.bench.json && node --expose-gc dist-bench/bench/constraints.js [non-stream CPU ms]`.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const figures = measureConstraintCompile()
  process.stdout.write(`${constraintTable(figures, Number(process.argv[2] ?? Number.NaN))}\n`)
  const problems = constraintProblems(figures)
  for (const p of problems) process.stdout.write(`PROBLEM: ${p}\n`)
  process.exitCode = problems.length > 0 ? 1 : 0
}
