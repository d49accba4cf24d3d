import { describe, expect, it } from "vitest"
import { expandedRuleCount } from "../../../src/providers/constraints/bound.js"
import { jsonSchemaGrammar } from "../../../src/providers/constraints/jsonSchemaGbnf.js"
import { accepts, parseGbnf } from "../../support/gbnf.js"

const compiled = (schema: unknown) => {
  const r = jsonSchemaGrammar(schema)
  if (r._tag !== "Grammar") throw new Error("too large")
  const p = parseGbnf(r.grammar)
  if (!p.ok) throw new Error(p.error)
  return { ...r, ok: (text: string) => accepts(p.grammar, text) }
}

const check = (schema: unknown, yes: ReadonlyArray<string>, no: ReadonlyArray<string>) => {
  const g = compiled(schema)
  for (const t of yes) expect(g.ok(t), `accepts ${t}`).toBe(true)
  for (const t of no) expect(g.ok(t), `rejects ${t}`).toBe(false)
  return g
}

describe("jsonSchemaGrammar", () => {
  it("types and type arrays", () => {
    check({ type: "null" }, ["null"], ["nul", "\"null\""])
    check({ type: "boolean" }, ["true", "false"], ["1"])
    check({ type: "integer" }, ["0", "-12", "123456789012345"], ["1.5", "01", "1234567890123456", "1e3"])
    check({ type: "number" }, ["0", "-1.25", "3e10", "1.5E-07"], ["1.", ".5", "1e999", "NaN"])
    check({ type: ["string", "null"] }, ["\"x\"", "null"], ["1"])
  })

  it("string escapes: no raw controls, only JSON escapes, no surrogate escapes", () => {
    check(
      { type: "string" },
      ["\"\"", "\"a\\\"b\\\\c\\/\\b\\f\\n\\r\\t\"", "\"\\u00e9\\uFFFF\"", "\"é😀\""],
      ["\"a\nb\"", "\"\t\"", "\"\\x\"", "\"\\u12\"", "\"\\ud83d\\ude00\"", "\"a\"b\"", "\"a"]
    )
  })

  it("escapes that llama.cpp (old and new) and xgrammar read alike: \\u, never \\x (xgrammar takes every hex digit after it) or \\-", () => {
    // A control character, `^` and `-` in a class, each followed by a hex digit.
    const g = check({ type: "string", pattern: "^[\\x01a^b\\-c]+$" }, ["\"a\"", "\"^b-c\"", "\"\\u0001\""], ["\"d\"", "\"\""])
    expect(g.grammar).not.toMatch(/\\x|\\-/)
    expect(g.grammar).toContain("\\u005E")
    expect(g.grammar).toContain("\\u002D")
  })

  it("minLength/maxLength count characters, an escape being one", () => {
    check({ type: "string", minLength: 2, maxLength: 3 }, ["\"ab\"", "\"a\\nb\"", "\"😀😀\""], ["\"a\"", "\"abcd\""])
  })

  it("objects: declared keys in schema order, required mandatory, optional optional, no other keys", () => {
    const schema = {
      type: "object",
      properties: { a: { type: "integer" }, b: { type: "string" }, c: { type: "boolean" } },
      required: ["b"]
    }
    check(
      schema,
      ["{\"b\":\"x\"}", "{\"a\":1,\"b\":\"x\",\"c\":true}", "{ \"a\" : 1 ,\n  \"b\":\"x\"\n}", "{\"b\":\"x\",\"c\":false}"],
      ["{}", "{\"a\":1}", "{\"b\":\"x\",\"a\":1}", "{\"b\":\"x\",\"d\":1}", "{\"b\":\"x\",}", "{,\"b\":\"x\"}"]
    )
    check({ type: "object", properties: { a: {}, b: {} } }, ["{}", "{\"a\":1}", "{\"b\":[]}", "{\"a\":1,\"b\":2}"], ["{,}"])
  })

  it("objects without properties: closed, a map, or any object", () => {
    check({ type: "object", additionalProperties: false }, ["{}", "{ }"], ["{\"a\":1}"])
    check({ type: "object", additionalProperties: { type: "integer" } }, ["{}", "{\"x\":1,\"y\":2}"], ["{\"x\":\"1\"}"])
    check({ type: "object" }, ["{}", "{\"x\":{\"y\":[1,null]}}"], ["[]"])
  })

  it("whitespace is bounded: one gap, at most a newline and 32 blanks", () => {
    const schema = { type: "array", items: { type: "integer" } }
    check(schema, ["[ 1 ,\n" + " ".repeat(32) + "2]"], ["[  1]", "[\n\n1]", "[\n" + " ".repeat(33) + "1]", " [1]"])
  })

  it("arrays: items, minItems/maxItems, prefixItems", () => {
    check({ type: "array", items: { type: "null" }, minItems: 1, maxItems: 2 }, ["[null]", "[null,null]"], ["[]", "[null,null,null]"])
    check({ type: "array", prefixItems: [{ type: "integer" }, { type: "string" }], items: false }, ["[]", "[1]", "[1,\"a\"]"], ["[\"a\"]", "[1,\"a\",2]"])
    check({ type: "array", maxItems: 0 }, ["[]"], ["[1]"])
  })

  it("enum and const are their values' compact JSON, filtered by type", () => {
    check({ enum: ["a", 1, null, { k: [1] }] }, ["\"a\"", "1", "null", "{\"k\":[1]}"], ["\"b\"", "{ \"k\":[1]}"])
    check({ type: "string", enum: ["a", 1] }, ["\"a\""], ["1"])
    check({ const: "x\"y" }, ["\"x\\\"y\""], ["\"x\""])
  })

  it("integer bounds as digit grammars", () => {
    check({ type: "integer", minimum: 1, maximum: 9 }, ["1", "9"], ["0", "10", "-1"])
    const g = check({ type: "integer", minimum: -15, maximum: 120 }, ["-15", "-1", "0", "99", "120"], ["-16", "-0", "121", "007"])
    for (let n = -15; n <= 120; n++) expect(g.ok(String(n))).toBe(true)
    check({ type: "integer", exclusiveMinimum: 0 }, ["1", "999"], ["0", "-1"])
    check({ type: "integer", minimum: 2.5, exclusiveMaximum: 5 }, ["3", "4"], ["2", "5"])
  })

  it("patterns: anchored, classes, quantifiers, alternation, groups; unanchored sides are free", () => {
    check({ type: "string", pattern: "^(ab|c)+[0-9]{2,3}$" }, ["\"abc12\"", "\"c123\""], ["\"ab1\"", "\"x12\"", "\"c1234\""])
    check({ type: "string", pattern: "^[^a-z]\\d?$" }, ["\"A\"", "\"\\\"1\"", "\"\\n\""], ["\"a\"", "\"A12\""])
    check({ type: "string", pattern: "x" }, ["\"x\"", "\"axb\""], ["\"ab\""])
    check({ type: "string", pattern: "^\\w+\\.\\s$" }, ["\"a_1.\\t\"", "\"a. \""], ["\"a.b\""])
  })

  it("formats", () => {
    check({ type: "string", format: "date" }, ["\"2024-02-28\"", "\"2024-12-31\""], ["\"2024-02-30\"", "\"2024-04-31\"", "\"2024-13-01\""])
    check({ type: "string", format: "date-time" }, ["\"2024-01-02T03:04:05Z\"", "\"2024-01-02T03:04:05.123+02:00\""], ["\"2024-01-02 03:04:05Z\"", "\"2024-01-02T24:00:00Z\""])
    check({ type: "string", format: "uuid" }, ["\"123e4567-e89b-12d3-a456-426614174000\""], ["\"123e4567\""])
    check({ type: "string", format: "email" }, ["\"a.b+c@example.co\""], ["\"a@b\"", "\"@b.c\"", "\"a..b@c.d\""])
  })

  it("anyOf/oneOf as alternatives; oneOf of overlapping branches reported", () => {
    const g = check({ anyOf: [{ type: "integer" }, { type: "string", maxLength: 1 }] }, ["1", "\"a\""], ["\"ab\"", "null"])
    expect(g.unconstrained).toEqual([])
    expect(compiled({ oneOf: [{ type: "integer" }, { type: "null" }] }).unconstrained).toEqual([])
    expect(compiled({ oneOf: [{ type: "integer" }, { type: "number" }] }).unconstrained).toEqual(["/oneOf"])
  })

  it("$ref to $defs/definitions, recursive, and left recursion reported", () => {
    const tree = {
      $defs: { node: { type: "object", properties: { v: { type: "integer" }, kids: { type: "array", items: { $ref: "#/$defs/node" } } }, required: ["v"] } },
      $ref: "#/$defs/node"
    }
    const g = check(tree, ["{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[{\"v\":3}]}]}"], ["{\"v\":1,\"kids\":[{}]}"])
    expect(g.unconstrained).toEqual([])
    check({ definitions: { s: { type: "string" } }, type: "array", items: { $ref: "#/definitions/s" } }, ["[\"a\"]"], ["[1]"])
    expect(compiled({ $defs: { a: { $ref: "#/$defs/b" }, b: { anyOf: [{ $ref: "#/$defs/a" }, { type: "null" }] } }, $ref: "#/$defs/a" }).unconstrained).toEqual(["/$defs/b/anyOf/0/$ref"])
    expect(compiled({ $ref: "https://example.com/s.json" }).unconstrained).toEqual(["/$ref"])
  })

  it("reports what it leaves unconstrained, as JSON pointers", () => {
    const g = compiled({
      type: "object",
      properties: {
        n: { type: "number", minimum: 0, multipleOf: 2 },
        s: { type: "string", pattern: "^(?=a)b$" },
        f: { type: "string", format: "hostname" },
        l: { type: "string", maxLength: 5000 },
        x: { not: { type: "null" } },
        "a/b": { type: "array", uniqueItems: true }
      },
      minProperties: 1
    })
    expect(g.unconstrained).toEqual([
      "/minProperties", "/properties/n/multipleOf", "/properties/s/pattern", "/properties/f/format",
      "/properties/l/maxLength", "/properties/x/not", "/properties/a~1b/uniqueItems"
    ])
  })

  it("the size bound refuses a grammar past its limits", () => {
    const big = { type: "object", properties: Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`key_${i}`, { enum: [`value ${i}`] }])) }
    const r = jsonSchemaGrammar(big)
    expect(r._tag).toBe("TooLarge")
    expect(jsonSchemaGrammar({ type: "string" }, { maxBytes: 10, maxRules: 100 })._tag).toBe("TooLarge")
    expect(jsonSchemaGrammar({ type: "string" }, { maxBytes: 10_000, maxRules: 2 })._tag).toBe("TooLarge")
    expect(expandedRuleCount("root ::= [a]{2,5} \"{3}\" x*\n")).toBe(7)
  })
})
