/**
 * Each text tool-call family's markup for one known call, as its chat template writes it (the shapes of the unit tests
 * in test/chat/toolcalls and test/chat/filters/harmony.test.ts), and the GBNF that makes llama-server write exactly it.
 */
import { TEXT_FORMATS } from "../../src/protocol/ModelOptions.js"

/** The call every family writes: `get_weather(city: string, days: integer)`. */
export const CITY = "São Paulo"
export const DAYS = 3
export const ARGS = { city: CITY, days: DAYS } as const
const JSON_ARGS = JSON.stringify(ARGS)

export interface Family {
  /** The model id in the edge's config: the format's name. */
  readonly id: string
  /** Text before the markup, which must come through as content exactly (`content`, when the format wraps it). */
  readonly prose: string
  readonly content?: string
  /** The markup of the call (after the prose). */
  readonly markup: string
  /** Text that must never reach content or reasoning. */
  readonly markers: ReadonlyArray<string>
  /** The reasoning the response carries (harmony's analysis channel). */
  readonly reasoning?: string
  /** A family that is not on by default (it has no marker to start on) is named for its model. */
  readonly toolFormats?: ReadonlyArray<string>
}

const D = "｜DSML｜"
const H = ":opensource>"
const invokeDsml = `<${D}invoke name="get_weather">\n` +
  `<${D}parameter name="city" string="true">${CITY}</${D}parameter>\n` +
  `<${D}parameter name="days" string="false">${DAYS}</${D}parameter>\n` +
  `</${D}invoke>\n`

const PROSE = "Let me check the weather for you."

export const FAMILIES: ReadonlyArray<Family> = [
  {
    id: "xml",
    prose: PROSE,
    markup: `<tool_call>\n{"name": "get_weather", "arguments": ${JSON_ARGS}}\n</tool_call>`,
    markers: ["<tool_call>", "</tool_call>", "\"name\""]
  },
  {
    id: "qwen3_xml",
    prose: "",
    markup: `<tool_call>\n<function=get_weather>\n<parameter=city>\n${CITY}\n</parameter>\n<parameter=days>\n${DAYS}\n` +
      "</parameter>\n</function>\n</tool_call>",
    markers: ["<tool_call>", "</tool_call>", "<function=", "<parameter="]
  },
  {
    id: "mustache",
    prose: PROSE,
    markup: `{{tool_call}}{"name": "get_weather", "arguments": ${JSON_ARGS}}{{/tool_call}}`,
    markers: ["{{tool_call}}", "{{/tool_call}}"]
  },
  {
    id: "glm45",
    prose: PROSE,
    markup: `<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>${CITY}</arg_value>\n` +
      `<arg_key>days</arg_key>\n<arg_value>${DAYS}</arg_value>\n</tool_call>`,
    markers: ["<tool_call>", "</tool_call>", "<arg_key>", "<arg_value>"]
  },
  {
    id: "glm47",
    prose: "",
    markup: `<tool_call>get_weather<arg_key>city</arg_key><arg_value>${CITY}</arg_value>` +
      `<arg_key>days</arg_key><arg_value>${DAYS}</arg_value></tool_call>`,
    markers: ["<tool_call>", "</tool_call>", "<arg_key>", "<arg_value>"]
  },
  {
    id: "minimax_m2",
    prose: PROSE,
    markup: `<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">${CITY}</parameter>\n` +
      `<parameter name="days">${DAYS}</parameter>\n</invoke>\n</minimax:tool_call>`,
    markers: ["<minimax:tool_call>", "</minimax:tool_call>", "<invoke", "<parameter"]
  },
  {
    id: "seed_oss",
    prose: PROSE,
    markup: `<seed:tool_call>\n<function=get_weather>\n<parameter=city>${CITY}</parameter>\n` +
      `<parameter=days>${DAYS}</parameter>\n</function>\n</seed:tool_call>`,
    markers: ["<seed:tool_call>", "</seed:tool_call>", "<function=", "<parameter="]
  },
  {
    id: "deepseek_v32",
    prose: PROSE,
    markup: `<${D}function_calls>\n${invokeDsml}</${D}function_calls>`,
    markers: [`<${D}function_calls>`, `</${D}function_calls>`, D]
  },
  {
    id: "deepseek_v4",
    prose: "",
    markup: `<${D}tool_calls>\n${invokeDsml}</${D}tool_calls>`,
    markers: [`<${D}tool_calls>`, `</${D}tool_calls>`, D]
  },
  {
    id: "kimi_k3",
    prose: PROSE,
    markup: "<|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"1\"<|sep|>" +
      `<|open|>argument key="city" type="string"<|sep|>${CITY}<|close|>argument<|sep|>` +
      `<|open|>argument key="days" type="number"<|sep|>${DAYS}<|close|>argument<|sep|>` +
      "<|close|>call<|sep|><|close|>tools<|sep|>",
    markers: ["<|open|>", "<|close|>", "<|sep|>"]
  },
  {
    id: "hy3",
    prose: PROSE,
    markup: `<tool_calls${H}\n<tool_call${H}get_weather<tool_sep${H}\n` +
      `<arg_key${H}city</arg_key${H}\n<arg_value${H}${CITY}</arg_value${H}\n` +
      `<arg_key${H}days</arg_key${H}\n<arg_value${H}${DAYS}</arg_value${H}\n` +
      `</tool_call${H}\n</tool_calls${H}`,
    markers: [H, "<tool_calls", "<arg_key"]
  },
  {
    id: "mistral",
    prose: PROSE,
    markup: `[TOOL_CALLS][{"name": "get_weather", "arguments": ${JSON_ARGS}}]`,
    markers: ["[TOOL_CALLS]", "\"name\""]
  },
  {
    id: "bare_json",
    prose: "",
    markup: `{"name": "get_weather", "arguments": ${JSON_ARGS}}`,
    markers: ["\"name\"", "\"arguments\""]
  },
  {
    id: "llama3_json",
    prose: PROSE,
    markup: `<|python_tag|>{"name": "get_weather", "parameters": ${JSON_ARGS}}<|eom_id|>`,
    markers: ["<|python_tag|>", "<|eom_id|>", "\"parameters\""]
  },
  {
    id: "granite",
    prose: PROSE,
    markup: `<|tool_call|>[{"name": "get_weather", "arguments": ${JSON_ARGS}}]`,
    markers: ["<|tool_call|>", "\"name\""]
  },
  {
    id: "cohere",
    prose: PROSE,
    markup: `<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather", "parameters": ${JSON_ARGS}}]<|END_ACTION|>`,
    markers: ["<|START_ACTION|>", "<|END_ACTION|>", "tool_name"]
  },
  {
    id: "apertus",
    prose: PROSE,
    markup: `<|tools_prefix|>[{"get_weather": ${JSON_ARGS}}]<|tools_suffix|>`,
    markers: ["<|tools_prefix|>", "<|tools_suffix|>"]
  },
  {
    id: "llamacpp_envelope",
    prose: "",
    markup: `{"tool_call": {"name": "get_weather", "arguments": ${JSON_ARGS}}}`,
    markers: ["\"tool_call\"", "\"name\""]
  },
  {
    id: "nemotron",
    prose: PROSE,
    markup: `<TOOLCALL>[{"name": "get_weather", "arguments": ${JSON_ARGS}}]</TOOLCALL>`,
    markers: ["<TOOLCALL>", "</TOOLCALL>"]
  },
  {
    id: "functionary_v31",
    prose: PROSE,
    markup: `<function=get_weather>${JSON_ARGS}</function>`,
    markers: ["<function=", "</function>"]
  },
  {
    id: "deepseek_v3",
    prose: PROSE,
    markup: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n" + JSON_ARGS +
      "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    markers: ["<｜tool▁", "```"]
  },
  {
    id: "kimi_k2",
    prose: PROSE,
    markup: "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>" +
      `${JSON_ARGS}<|tool_call_end|><|tool_calls_section_end|>`,
    markers: ["<|tool_call", "functions."]
  },
  {
    id: "pythonic",
    prose: "",
    markup: `[get_weather(city="${CITY}", days=${DAYS})]`,
    markers: ["get_weather("]
  },
  {
    id: "llama4_pythonic",
    prose: PROSE,
    markup: `<|python_start|>[get_weather(city="${CITY}", days=${DAYS})]<|python_end|>`,
    markers: ["<|python_start|>", "<|python_end|>", "get_weather("]
  },
  {
    id: "olmo3",
    prose: PROSE,
    markup: `<function_calls>get_weather(city="${CITY}", days=${DAYS})</function_calls>`,
    markers: ["<function_calls>", "</function_calls>", "get_weather("]
  },
  {
    id: "lfm2",
    prose: PROSE,
    markup: `<|tool_call_start|>[get_weather(city='${CITY}', days=${DAYS})]<|tool_call_end|>`,
    markers: ["<|tool_call_start|>", "<|tool_call_end|>", "get_weather("]
  },
  {
    id: "function_gemma",
    prose: PROSE,
    markup: `<start_function_call>call:get_weather{city:<escape>${CITY}<escape>,days:${DAYS}}<end_function_call>`,
    markers: ["<start_function_call>", "<end_function_call>", "<escape>", "call:"]
  },
  {
    id: "gemma4",
    prose: PROSE,
    markup: `<|tool_call>call:get_weather{city:<|"|>${CITY}<|"|>,days:${DAYS}}<tool_call|>`,
    markers: ["<|tool_call>", "<tool_call|>", "<|\"|>", "call:"]
  },
  {
    id: "harmony",
    prose: "",
    reasoning: "The user wants the weather. I will call the tool.",
    markup: "<|channel|>analysis<|message|>The user wants the weather. I will call the tool.<|end|>" +
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" +
      `${JSON_ARGS}<|call|>`,
    markers: ["<|channel|>", "<|message|>", "<|start|>", "<|end|>", "<|call|>", "<|constrain|>", "to=functions"]
  },
  {
    id: "minimax_m1",
    prose: PROSE,
    markup: `<tool_calls>\n{"name": "get_weather", "arguments": ${JSON_ARGS}}\n</tool_calls>`,
    markers: ["<tool_calls>", "</tool_calls>", "\"name\""]
  },
  {
    // The prompt ends with `>>>`: the answer starts with its first recipient.
    id: "functionary_v32",
    prose: "all\nLet me check the weather for you.",
    content: "Let me check the weather for you.",
    markup: `>>>get_weather\n${JSON_ARGS}`,
    markers: [">>>"],
    toolFormats: ["functionary_v32"]
  }
]

/** Every text format is covered (harmony included). */
export const uncovered = (): ReadonlyArray<string> => TEXT_FORMATS.filter((f) => !FAMILIES.some((x) => x.id === f))

/** The markers of every family: none may appear in any content or reasoning. */
export const ALL_MARKERS: ReadonlyArray<string> = [...new Set(FAMILIES.flatMap((f) => f.markers))]
  .filter((m) => !["\"name\"", "\"arguments\"", "\"parameters\"", "tool_name", "get_weather(", "call:", "functions."].includes(m))

/** A GBNF string literal (llama.cpp's rules: `\"`, `\\`, `\n`, `\r`, `\t` escaped; other characters as they are). */
export const gbnfLiteral = (text: string): string =>
  `"${text.replace(/\\/g, "\\\\").replace(/"/g, "\\\"").replace(/\n/g, "\\n").replace(/\r/g, "\\r").replace(/\t/g, "\\t")}"`

/** The grammar that allows exactly this text. */
export const grammarOf = (text: string): string => `root ::= ${gbnfLiteral(text)}\n`
