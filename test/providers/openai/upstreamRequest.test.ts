import { describe, expect, it } from "@effect/vitest"
import { toolsPrompt, toUpstreamBody } from "../../../src/providers/openai/upstreamRequest.js"
import type { FunctionTool, SubmitRunRequest } from "../../../src/protocol/SubmitRunRequest.js"

const weather: FunctionTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather of a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
  }
}
const time: FunctionTool = { type: "function", function: { name: "get_time", parameters: { type: "object" } } }

const base: SubmitRunRequest = {
  model: "qwen",
  messages: [{ role: "user", content: "Weather in Paris?" }],
  tools: [],
  sampling: {},
  metadata: {}
}

const history: SubmitRunRequest = {
  ...base,
  tools: [weather, time],
  messages: [
    { role: "system", content: "You are terse." },
    { role: "user", content: "Weather and time in Paris?" },
    {
      role: "assistant",
      content: "Checking.",
      tool_calls: [
        { id: "call_1", function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } },
        { id: "call_2", type: "function", function: { name: "get_time", arguments: "{}" } }
      ]
    },
    { role: "tool", tool_call_id: "call_1", content: "18°C, cloudy" },
    { role: "tool", tool_call_id: "call_2", content: [{ type: "text", text: "14:05" }] },
    { role: "user", content: "Thanks" }
  ]
}

describe("toUpstreamBody: native mode", () => {
  it("minimal request: model, messages, stream with usage, nothing undefined", () => {
    const body = toUpstreamBody(base, { upstreamModel: "qwen2.5:7b", toolMode: "native" })
    expect(body).toEqual({
      model: "qwen2.5:7b",
      messages: [{ role: "user", content: "Weather in Paris?" }],
      stream: true,
      stream_options: { include_usage: true }
    })
    expect(Object.values(body)).not.toContain(undefined)
  })

  it("sampling parameters in the wire names", () => {
    const body = toUpstreamBody(
      {
        ...base,
        sampling: {
          temperature: 0.2,
          topP: 0.9,
          maxTokens: 256,
          stop: ["</s>"],
          seed: 7,
          presencePenalty: 0.1,
          frequencyPenalty: 0.3,
          responseFormat: { type: "json_object" }
        }
      },
      { upstreamModel: "m", toolMode: "native" }
    )
    expect(body).toMatchObject({
      temperature: 0.2,
      top_p: 0.9,
      max_tokens: 256,
      stop: ["</s>"],
      seed: 7,
      presence_penalty: 0.1,
      frequency_penalty: 0.3,
      response_format: { type: "json_object" }
    })
  })

  it("tools, tool_choice, parallel_tool_calls passed on; history tool calls and tool messages kept", () => {
    const body = toUpstreamBody(
      { ...history, toolChoice: "required", parallelToolCalls: false },
      { upstreamModel: "m", toolMode: "native" }
    )
    expect(body.tools).toEqual([weather, time])
    expect(body.tool_choice).toBe("required")
    expect(body.parallel_tool_calls).toBe(false)
    expect(body.messages).toEqual([
      { role: "system", content: "You are terse." },
      { role: "user", content: "Weather and time in Paris?" },
      {
        role: "assistant",
        content: "Checking.",
        tool_calls: [
          { id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } },
          { id: "call_2", type: "function", function: { name: "get_time", arguments: "{}" } }
        ]
      },
      { role: "tool", tool_call_id: "call_1", content: "18°C, cloudy" },
      { role: "tool", tool_call_id: "call_2", content: [{ type: "text", text: "14:05" }] },
      { role: "user", content: "Thanks" }
    ])
  })

  it("content-part arrays pass through untouched", () => {
    const parts = [
      { type: "text", text: "What is this?" },
      { type: "image_url", image_url: { url: "data:image/png;base64,AAAA", detail: "low" } }
    ]
    const body = toUpstreamBody({ ...base, messages: [{ role: "user", content: parts }] }, {
      upstreamModel: "m",
      toolMode: "native"
    })
    expect(body.messages).toEqual([{ role: "user", content: parts }])
  })

  it("no tools: no tool_choice or parallel_tool_calls either", () => {
    const body = toUpstreamBody({ ...base, toolChoice: "auto", parallelToolCalls: true }, {
      upstreamModel: "m",
      toolMode: "native"
    })
    expect(body).not.toHaveProperty("tools")
    expect(body).not.toHaveProperty("tool_choice")
    expect(body).not.toHaveProperty("parallel_tool_calls")
  })
})

describe("toUpstreamBody: text mode", () => {
  const text = (request: SubmitRunRequest) => toUpstreamBody(request, { upstreamModel: "m", toolMode: "text" })

  it("sends no tools; describes them in the system prompt, merged into the existing first system message", () => {
    const body = text({ ...history, toolChoice: "auto", parallelToolCalls: true })
    expect(body).not.toHaveProperty("tools")
    expect(body).not.toHaveProperty("tool_choice")
    expect(body).not.toHaveProperty("parallel_tool_calls")
    const messages = body.messages as ReadonlyArray<{ role: string; content: string }>
    const system = messages[0]!
    expect(system.role).toBe("system")
    expect(system.content.startsWith("You are terse.\n\n# Tools")).toBe(true)
    expect(system.content).toContain("<tools>\n" + JSON.stringify(weather) + "\n" + JSON.stringify(time) + "\n</tools>")
    expect(system.content).toContain(
      "<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>"
    )
    expect(messages.filter((m) => m.role === "system")).toHaveLength(1)
  })

  it("rewrites history: assistant tool_calls → <tool_call> text, tool messages → one merged user message", () => {
    const messages = text(history).messages as ReadonlyArray<Record<string, unknown>>
    expect(messages.slice(1)).toEqual([
      { role: "user", content: "Weather and time in Paris?" },
      {
        role: "assistant",
        content: "Checking.\n<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}\n</tool_call>\n" +
          "<tool_call>\n{\"name\":\"get_time\",\"arguments\":{}}\n</tool_call>"
      },
      {
        role: "user",
        content: "<tool_response>\n18°C, cloudy\n</tool_response>\n<tool_response>\n14:05\n</tool_response>"
      },
      { role: "user", content: "Thanks" }
    ])
    for (const m of messages) {
      expect(m).not.toHaveProperty("tool_calls")
      expect(m).not.toHaveProperty("tool_call_id")
    }
  })

  it("prepends a system message when there is none; appends a text part to a content-part system message", () => {
    const prepended = text({ ...base, tools: [weather] }).messages as ReadonlyArray<{ role: string; content: unknown }>
    expect(prepended).toHaveLength(2)
    expect(prepended[0]).toEqual({ role: "system", content: toolsPrompt({ ...base, tools: [weather] }) })
    expect(prepended[1]).toEqual({ role: "user", content: "Weather in Paris?" })

    const parts = text({
      ...base,
      tools: [weather],
      messages: [{ role: "system", content: [{ type: "text", text: "Be kind." }] }, ...base.messages]
    }).messages as ReadonlyArray<{ role: string; content: unknown }>
    expect(parts[0]!.content).toEqual([
      { type: "text", text: "Be kind." },
      { type: "text", text: toolsPrompt({ ...base, tools: [weather] }) }
    ])
  })

  it("arguments that are not JSON are embedded as a string", () => {
    const messages = text({
      ...base,
      tools: [weather],
      messages: [{ role: "assistant", content: null, tool_calls: [{ id: "c", function: { name: "f", arguments: "{bad" } }] }]
    }).messages as ReadonlyArray<{ content: string }>
    expect(messages[1]!.content).toBe("<tool_call>\n{\"name\":\"f\",\"arguments\":\"{bad\"}\n</tool_call>")
  })

  it("tool_choice: none → no tools prompt; required / a named function / no parallel calls → an instruction", () => {
    expect(text({ ...base, tools: [weather], toolChoice: "none" }).messages).toEqual(base.messages)
    expect(toolsPrompt({ ...base, tools: [weather], toolChoice: "required" })).toContain("must call at least one")
    const named = toolsPrompt({
      ...base,
      tools: [weather, time],
      toolChoice: { type: "function", function: { name: "get_time" } },
      parallelToolCalls: false
    })!
    expect(named).toContain("must call the function \"get_time\"")
    expect(named).toContain("at most one function")
    expect(named).not.toContain("get_weather")
  })

  it("without tools, text mode leaves the messages alone", () => {
    expect(text(base).messages).toEqual(base.messages)
  })
})

describe("toUpstreamBody: the configured extraBody", () => {
  it("adds the upstream's own parameters, and never overrides what the edge sends from the request", () => {
    const body = toUpstreamBody(
      { ...base, sampling: { ...base.sampling, temperature: 0.5 } },
      {
        upstreamModel: "up",
        toolMode: "native",
        extraBody: { grammar: "root ::= \"x\"", top_k: 40, temperature: 2, model: "other", stream: false }
      }
    )
    expect(body).toMatchObject({ grammar: "root ::= \"x\"", top_k: 40, temperature: 0.5, model: "up", stream: true })
  })
})

describe("toUpstreamBody: a constraint (outputConstraint.ts decides it)", () => {
  const withTools: SubmitRunRequest = { ...base, tools: [weather, time], toolChoice: "required" }
  const system = (body: Record<string, unknown>): string => {
    const messages = body["messages"] as ReadonlyArray<{ readonly role: string; readonly content: unknown }>
    return String(messages[0]?.role === "system" ? messages[0].content : "")
  }

  it("its fields go in the body, over extraBody's and under the request's own", () => {
    const body = toUpstreamBody({ ...withTools, sampling: { temperature: 0.2 } }, {
      upstreamModel: "up",
      toolMode: "text",
      extraBody: { top_k: 40, grammar: "root ::= \"configured\"" },
      constraint: { fields: { grammar: "root ::= \"compiled\"", temperature: 9 }, shape: "hermes" }
    })
    expect(body).toMatchObject({ grammar: "root ::= \"compiled\"", top_k: 40, temperature: 0.2 })
    expect(body).not.toHaveProperty("tools")
  })

  it("the prompt teaches the shape the constraint forces: Hermes markup, one bare JSON call, or the envelope", () => {
    const prompt = (shape: "hermes" | "json_call" | "json_calls") =>
      system(toUpstreamBody(withTools, { upstreamModel: "up", toolMode: "text", constraint: { fields: {}, shape } }))
    expect(prompt("hermes")).toContain("<tool_call></tool_call> XML tags")
    expect(prompt("json_call")).toContain("answer with nothing but a json object with the function name")
    expect(prompt("json_call")).not.toContain("<tool_call>")
    expect(prompt("json_calls")).toContain("{\"tool_calls\": [{\"name\": <function-name>")
    // No constraint: the Hermes markup, as ever.
    expect(system(toUpstreamBody(withTools, { upstreamModel: "up", toolMode: "text" }))).toBe(prompt("hermes"))
  })
})
