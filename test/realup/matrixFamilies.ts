/**
 * The matrix's five schema families (issue 21's "Done when"): each a strict tool whose schema the random-weight model
 * cannot satisfy by chance, so every valid call is the constraint's doing. A request offers its family's tool,
 * another family's, and on every other family a third one, so that named and `auto` choices have something to
 * choose between.
 */

export interface MatrixTool {
  readonly name: string
  readonly description: string
  readonly parameters: Readonly<Record<string, unknown>>
}

export interface SchemaFamily {
  readonly id: string
  /** What the family exercises, for the table. */
  readonly keywords: string
  readonly tool: MatrixTool
}

const closed = (properties: Record<string, unknown>, required: ReadonlyArray<string>) =>
  ({ type: "object", properties, required, additionalProperties: false }) as const

const code = { type: "string", pattern: "^[A-Z]{3}$" } as const

export const FLAT: SchemaFamily = {
  id: "flat",
  keywords: "pattern, enum, integer bounds, required, additionalProperties false",
  tool: {
    name: "book_flight",
    description: "Book a flight",
    parameters: closed({
      from: code,
      to: code,
      cabin: { enum: ["economy", "business", "first"] },
      passengers: { type: "integer", minimum: 1, maximum: 9 },
      date: { type: "string", format: "date" }
    }, ["from", "to", "cabin", "passengers"])
  }
}

export const NESTED: SchemaFamily = {
  id: "nested",
  keywords: "objects 3 levels deep, required keys inside each",
  tool: {
    name: "create_order",
    description: "Place an order",
    parameters: closed({
      customer: closed({ id: { type: "string", pattern: "^C[0-9]{6}$" }, tier: { enum: ["free", "pro", "team"] } }, [
        "id",
        "tier"
      ]),
      shipping: closed({
        address: closed({ country: { type: "string", pattern: "^[A-Z]{2}$" }, zip: { type: "string", pattern: "^[0-9]{5}$" } }, [
          "country",
          "zip"
        ]),
        speed: { enum: ["standard", "express"] }
      }, ["address", "speed"]),
      gift: { type: "boolean" }
    }, ["customer", "shipping"])
  }
}

export const ARRAYS: SchemaFamily = {
  id: "arrays",
  keywords: "minItems/maxItems, items objects with enums",
  tool: {
    name: "plan_trip",
    description: "Plan a trip in legs",
    parameters: closed({
      legs: {
        type: "array",
        minItems: 2,
        maxItems: 4,
        items: closed({
          mode: { enum: ["train", "bus", "ferry"] },
          stop: code,
          nights: { type: "integer", minimum: 0, maximum: 7 }
        }, ["mode", "stop"])
      },
      tags: { type: "array", maxItems: 3, items: { enum: ["budget", "family", "scenic"] } }
    }, ["legs"])
  }
}

export const NUMERIC: SchemaFamily = {
  id: "numeric",
  keywords: "number minimum/maximum/exclusiveMinimum, integer bounds, integer multipleOf",
  tool: {
    name: "set_climate",
    description: "Set the climate control",
    parameters: closed({
      celsius: { type: "number", minimum: 5, maximum: 30 },
      humidity: { type: "number", exclusiveMinimum: 0, maximum: 1 },
      fan: { type: "integer", minimum: 0, maximum: 5 },
      step: { type: "integer", minimum: 0, maximum: 100, multipleOf: 5 }
    }, ["celsius", "humidity", "fan", "step"])
  }
}

export const STRINGS: SchemaFamily = {
  id: "strings",
  keywords: "minLength/maxLength, format date, const",
  tool: {
    name: "send_note",
    description: "Send a note",
    parameters: closed({
      subject: { type: "string", minLength: 3, maxLength: 20 },
      body: { type: "string", minLength: 1, maxLength: 60 },
      due: { type: "string", format: "date" },
      kind: { const: "reminder" },
      version: { type: "integer", const: 2 }
    }, ["subject", "body", "due", "kind", "version"])
  }
}

export const SCHEMA_FAMILIES: ReadonlyArray<SchemaFamily> = [FLAT, NESTED, ARRAYS, NUMERIC, STRINGS]

/** The third tool some requests offer: no free text at all. */
export const GET_TIME: MatrixTool = {
  name: "get_time",
  description: "The time in a zone",
  parameters: closed({ zone: { enum: ["UTC", "CET", "JST"] } }, ["zone"])
}

/**
 * The tools one request of a family offers; the family's own tool first (the one a named choice names). The
 * numeric family's tool is offered in its own rows only (its grammar was the last to compile whole).
 */
export const toolsOf = (family: SchemaFamily): ReadonlyArray<MatrixTool> => {
  const i = SCHEMA_FAMILIES.indexOf(family)
  const others = SCHEMA_FAMILIES.filter((f) => f !== family && f !== NUMERIC)
  const next = others[i % others.length] ?? FLAT
  return i % 2 === 0 ? [family.tool, next.tool, GET_TIME] : [family.tool, next.tool]
}
