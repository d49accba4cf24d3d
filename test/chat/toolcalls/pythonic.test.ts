import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { parsePythonicCalls, pythonicBlock } from "../../../src/chat/toolcalls/pythonic.js"
import { lfm2, llama4Pythonic, olmo3, pythonic } from "../../../src/chat/toolcalls/pythonicFormats.js"
import { PYTHONIC_OPENED, pythonicClosed, pythonicDead, pythonicStep } from "../../../src/chat/toolcalls/pythonicScan.js"
import type { RequestTool } from "../../../src/chat/toolcalls/types.js"

const tools: ReadonlyArray<RequestTool> = [
  {
    name: "get_weather",
    parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } } }
  },
  {
    name: "search",
    parameters: {
      type: "object",
      properties: {
        query: { type: "string" },
        tags: { type: "array" },
        exact: { type: "boolean" },
        n: { type: ["integer", "null"] },
        ratio: { type: "number" },
        opts: { type: "object" },
        note: { description: "untyped" }
      }
    }
  }
]

const calls = (list: ReadonlyArray<readonly [string, unknown]>) => ({
  _tag: "Calls",
  calls: list.map(([name, args]) => ({ name, arguments: JSON.stringify(args) }))
})

/** Args of the single call of a list (as JSON values), or the parse error. */
const argsOf = (text: string): unknown => {
  const parsed = parsePythonicCalls(text, "list")
  return parsed.ok ? Object.fromEntries(parsed.calls[0]?.args ?? []) : parsed.error
}

/** The bare scanner over `text` (which starts with `[`): "done" at the index past `]`, "dead", or "open". */
const scan = (text: string): string => {
  let s = PYTHONIC_OPENED
  for (let i = 1; i < text.length; i++) {
    s = pythonicStep(s, text.charCodeAt(i))
    if (pythonicDead(s)) return `dead@${i}`
    if (pythonicClosed(s)) return `done@${i + 1}`
  }
  return "open"
}

describe("pythonic literals", () => {
  it("parses the brief's example", () => {
    const text = "[get_weather(city=\"SF\", days=3), search(query='a, b', tags=[\"x\"], exact=True, n=None)]"
    expect(pythonicBlock(text, tools, "w", "list")).toEqual(calls([
      ["get_weather", { city: "SF", days: 3 }],
      ["search", { query: "a, b", tags: ["x"], exact: true, n: null }]
    ]))
  })

  it("reads every quoting and escape", () => {
    expect(argsOf("[f(a='it\\'s', b=\"say \\\"hi\\\"\", c='''x\n'y'\n''', d=\"\"\"q\"\"\", e='')]")).toEqual({
      a: "it's",
      b: "say \"hi\"",
      c: "x\n'y'\n",
      d: "q",
      e: ""
    })
    expect(argsOf("[f(a='\\n\\t\\\\\\x41\\u00e9\\U0001F600\\0', b=r'C:\\dir\\n', c=u'ü', d='\\q')]")).toEqual({
      a: "\n\t\\Aé😀\0",
      b: "C:\\dir\\n",
      c: "ü",
      d: "\\q"
    })
    expect(argsOf("[f(a=\"😀 é\n\")]")).toEqual({ a: "😀 é\n" })
  })

  it("reads numbers and constants, Python's and JSON's", () => {
    expect(argsOf("[f(a=1e3, b=-2, c=+1.5, d=.5, e=1_000, f=0x1F, g=2E-2, h=true, i=False, j=null, k=None)]")).toEqual({
      a: 1000,
      b: -2,
      c: 1.5,
      d: 0.5,
      e: 1000,
      f: 31,
      g: 0.02,
      h: true,
      i: false,
      j: null,
      k: null
    })
  })

  it("reads nested lists, tuples and dicts, trailing commas too", () => {
    expect(argsOf("[f(a={'k': [1, (2, 3), {\"z\": None}], 2: True,}, b=(1,), c=(1), d=(), e=[],)]")).toEqual({
      a: { k: [1, [2, 3], { z: null }], 2: true },
      b: [1],
      c: 1,
      d: [],
      e: []
    })
    expect(argsOf("[f(a={\"__proto__\": 1})]")).toEqual({ a: JSON.parse("{\"__proto__\": 1}") })
  })

  it("refuses what is not a literal or not a keyword argument", () => {
    for (
      const [text, reason] of [
        ["[f(\"x\")]", "positional"],
        ["[f(x)]", "positional"],
        ["[f(a=1, 2)]", "positional"],
        ["[f(a==1)]", "positional"],
        ["[f(a=b)]", "not a literal"],
        ["[f(a=g(1))]", "not a literal"],
        ["[f(a={1, 2})]", "expected :"],
        ["[f(a='x)]", "unterminated"],
        ["[f(a=1j)]", "not a number"],
        ["[f(a=-inf)]", "not a number"],
        ["[f(a=1)", "expected , or ]"],
        ["[f(a=1)] and more", "text after"],
        ["[]", "no calls"],
        ["f(a=1)", "expected ["],
        [`[f(a=${"[".repeat(300)}${"]".repeat(300)})]`, "nested too deeply"]
      ] as const
    ) {
      expect(argsOf(text)).toContain(reason)
    }
  })

  it("types a string by the property's schema, and leaves other values as written", () => {
    const text = "[search(n=\"3\", ratio='0.5', exact=\"true\", tags='[1]', query=\"7\", note='8', opts={\"a\": \"1\"})]"
    expect(pythonicBlock(text, tools, "w", "list")).toEqual(calls([
      ["search", { n: 3, ratio: 0.5, exact: true, tags: [1], query: "7", note: "8", opts: { a: "1" } }]
    ]))
    // A value that does not fit stays as written for validation to judge; a non-string is never retyped.
    expect(pythonicBlock("[get_weather(days='many', city=3)]", tools, "w", "list")).toEqual(
      calls([["get_weather", { days: "many", city: 3 }]])
    )
    // An undeclared tool keeps the values as parsed.
    expect(pythonicBlock("[other(x='3')]", tools, "w", "list")).toEqual(calls([["other", { x: "3" }]]))
  })

  it("loose lists: brackets optional, calls one per line or comma", () => {
    expect(parsePythonicCalls("a(x=1)\nb(y=\"2\")\n", "loose")).toMatchObject({ ok: true, calls: [{ name: "a" }, { name: "b" }] })
    expect(parsePythonicCalls(" a(), b() ", "loose")).toMatchObject({ ok: true, calls: [{ name: "a" }, { name: "b" }] })
    expect(parsePythonicCalls("[a()]", "loose")).toMatchObject({ ok: true, calls: [{ name: "a", args: [] }] })
    expect(parsePythonicCalls("", "loose")).toEqual({ ok: false, error: "no calls" })
    expect(parsePythonicCalls("Sure, here it is", "loose").ok).toBe(false)
  })

  it("is linear: a 1 MB string argument and 100k calls parse at once", () => {
    const big = "x\\'".repeat(300_000)
    expect(argsOf(`[f(a='${big}')]`)).toEqual({ a: "x'".repeat(300_000) })
    const many = `[${Array.from({ length: 100_000 }, (_, i) => `f(i=${i})`).join(", ")}]`
    const parsed = parsePythonicCalls(many, "list")
    expect(parsed.ok && parsed.calls.length).toBe(100_000)
  })
})

describe("pythonic scanner", () => {
  it("finds the outer ] past brackets and quotes of every kind", () => {
    const list = "[f(a=']', b=\"[)\", c='''x]''', d=\"\"\"]\\\"x\"\"\", e=[1, (2, {3: ']'})], f=''), g()]"
    expect(parsePythonicCalls(list, "list").ok).toBe(true)
    expect(scan(`${list}  tail`)).toBe(`done@${list.length}`)
    expect(scan("[f(a='it\\'s]')]")).toBe("done@15")
    expect(scan("[ f ( a = 1 , ) , ]")).toBe("done@19")
  })

  it("dies as early as the text cannot be a call list", () => {
    expect(scan("[see above]")).toBe("dead@5")
    expect(scan("[1, 2]")).toBe("dead@1")
    expect(scan("[]")).toBe("dead@1")
    expect(scan("[ x]")).toBe("dead@3")
    expect(scan("[see(above)]")).toBe("dead@10")
    expect(scan("[f(a)]")).toBe("dead@4")
    expect(scan("[f(a==1)]")).toBe("dead@5")
    expect(scan("[f(a=)]")).toBe("dead@5")
    expect(scan("[f(a=*x)]")).toBe("dead@5")
    expect(scan("[f(a= ]")).toBe("dead@6")
    expect(scan("[Note: see above]")).toBe("dead@5")
    expect(scan("[f(a=1)] x")).toBe("done@8")
    expect(scan("[f(a=1)) ")).toBe("dead@7")
    expect(scan("[f(a=1) g()]")).toBe("dead@8")
    expect(scan("[f(a='x')")).toBe("open")
  })

  it.prop(
    "closes exactly at the end of any generated call list, and parses it",
    [
      fc.array(
        fc.record({
          name: fc.constantFrom("get_weather", "search", "f_1"),
          args: fc.dictionary(
            fc.constantFrom("a", "b_2", "city"),
            fc.jsonValue({ maxDepth: 3 }).filter((v) => v !== undefined)
          )
        }),
        { minLength: 1, maxLength: 3 }
      ),
      fc.constantFrom("", " ", "\n")
    ],
    ([list, gap]) => {
      // JSON values are Python literals once true/false/null are spelled either way: JSON text is pythonic.
      const text = `[${list.map((c) => `${c.name}(${Object.entries(c.args).map(([k, v]) => `${k}=${gap}${JSON.stringify(v)}`).join(`,${gap}`)})`).join(", ")}]`
      expect(scan(`${text} x`)).toBe(`done@${text.length}`)
      const parsed = parsePythonicCalls(text, "list")
      expect(parsed.ok && parsed.calls.map((c) => [c.name, Object.fromEntries(c.args)])).toEqual(
        list.map((c) => [c.name, JSON.parse(JSON.stringify(c.args))])
      )
    },
    { fastCheck: { numRuns: 500 } }
  )
})

describe("pythonic (bare, Llama 3.2 / ToolACE)", () => {
  it("declares its shape", () => {
    expect(pythonic.format).toBe("pythonic")
    expect(pythonic.first).toBe(0x5b)
    expect(pythonic.start).toBe(PYTHONIC_OPENED)
  })

  it("a whole response of request tools is calls, named as the request names them", () => {
    expect(pythonic.parse(" [Get_Weather(city='Paris', days='2'), search()]\n", tools)).toEqual([
      { name: "get_weather", arguments: "{\"city\":\"Paris\",\"days\":2}" },
      { name: "search", arguments: "{}" }
    ])
  })

  it("is text when a name is not a request tool, or the list cannot be read", () => {
    expect(pythonic.parse("[see(above=1)]", tools)).toBeUndefined()
    expect(pythonic.parse("[get_weather(city='x'), other()]", tools)).toBeUndefined()
    expect(pythonic.parse("[get_weather('x')]", tools)).toBeUndefined()
    expect(pythonic.parse("[get_weather(city='x')] and so on", tools)).toBeUndefined()
    expect(pythonic.parse("[]", tools)).toBeUndefined()
  })

  it("step/done/dead agree with parse on the template's shape", () => {
    let s = pythonic.start
    const text = "[get_weather(city=\"San Francisco, CA\", days=3)]"
    for (const ch of text.slice(1)) {
      expect(pythonic.dead(s)).toBe(false)
      expect(pythonic.done(s)).toBe(false)
      s = pythonic.step(s, ch.charCodeAt(0))
    }
    expect(pythonic.done(s)).toBe(true)
    expect(pythonic.done(pythonic.step(s, 0x0a))).toBe(true)
    expect(pythonic.dead(pythonic.step(s, 0x78))).toBe(true)
  })
})

describe("llama4_pythonic, olmo3, lfm2", () => {
  it("llama4: the list between <|python_start|> and <|python_end|>", () => {
    expect(llama4Pythonic.parse("[get_weather(city='LA', days=2)]", true, tools)).toEqual(
      calls([["get_weather", { city: "LA", days: 2 }]])
    )
    expect(llama4Pythonic.parse("get_weather(city='LA')", false, tools)).toEqual(calls([["get_weather", { city: "LA" }]]))
    expect(llama4Pythonic.parse("print('hi')", true, tools)).toMatchObject({
      _tag: "Malformed",
      reason: expect.stringContaining("<|python_start|>")
    })
  })

  it("olmo3: one call per line, JSON values", () => {
    const body = "get_weather(city=\"Paris \\\"FR\\\"\", days=2)\nsearch(query=\"x\", tags=[\"a\", {\"b\": null}], exact=true)"
    expect(olmo3.parse(body, true, tools)).toEqual(calls([
      ["get_weather", { city: "Paris \"FR\"", days: 2 }],
      ["search", { query: "x", tags: ["a", { b: null }], exact: true }]
    ]))
    expect(olmo3.parse("", true, tools)._tag).toBe("Malformed")
    expect(olmo3.parse("get_weather(city=)", true, tools)._tag).toBe("Malformed")
  })

  it("lfm2: the list, strings single-quoted, dicts as JSON", () => {
    const body = "[search(query='café ☕', opts={\"deep\": {\"k\": [1, 2]}}, exact=False), get_weather()]"
    expect(lfm2.parse(body, true, tools)).toEqual(calls([
      ["search", { query: "café ☕", opts: { deep: { k: [1, 2] } }, exact: false }],
      ["get_weather", {}]
    ]))
    expect(lfm2.parse("[search(query='unterminated)]", true, tools)._tag).toBe("Malformed")
  })

  it("open hints are distinct and none is a proper substring of another", () => {
    const opens = [llama4Pythonic.open, olmo3.open, lfm2.open, "<tool_call>", "{{tool_call}}", "[TOOL_CALLS]", "<|tool_call>"]
    for (const a of opens) for (const b of opens) if (a !== b) expect(b.toLowerCase().includes(a.toLowerCase())).toBe(false)
  })
})
