import { TEXT_FORMATS, type TextFormat } from "./ModelOptions.js"

/**
 * `toolFormats: "auto"`: which text formats a model's chat template teaches. A template that teaches a format
 * spells its markers (sometimes built from pieces: `'｜DSML｜'` then `function_calls`), so each format is known by
 * the text its template must contain: any one of its signatures, each a list of pieces that must all appear.
 */
const SIGNATURES: Readonly<Record<TextFormat, ReadonlyArray<ReadonlyArray<string>>>> = {
  harmony: [["<|channel|>", "<|message|>"]],
  functionary_v32: [[">>>${recipient}"], ["recipient==all"]],
  // The formats that share `<tool_call>` are told apart by their bodies: any of them keeps all of them.
  xml: [["<tool_call>"]],
  qwen3_xml: [["<tool_call>"]],
  glm45: [["<tool_call>"]],
  glm47: [["<tool_call>"]],
  mustache: [["{{tool_call}}"]],
  mistral: [["[TOOL_CALLS]"]],
  minimax_m2: [["<minimax:tool_call>"]],
  minimax_m1: [["<tool_calls>", "</tool_calls>"]],
  seed_oss: [["<seed:tool_call>"]],
  deepseek_v32: [["｜DSML｜", "function_calls"]],
  deepseek_v4: [["｜DSML｜", "tool_calls"]],
  kimi_k3: [["<|open|>", "<|sep|>"]],
  hy3: [[":opensource", "tool_calls"]],
  llama3_json: [["<|python_tag|>"]],
  granite: [["<|tool_call|>"]],
  cohere: [["<|START_ACTION|>"]],
  apertus: [["<|tools_prefix|>"]],
  nemotron: [["<TOOLCALL>"]],
  functionary_v31: [["<function="]],
  deepseek_v3: [["tool▁calls▁begin"], ["tool_calls_begin"]],
  kimi_k2: [["<|tool_calls_section_begin|>"]],
  llama4_pythonic: [["<|python_start|>"]],
  olmo3: [["<function_calls>"]],
  lfm2: [["<|tool_call_start|>"]],
  function_gemma: [["<start_function_call>"]],
  gemma4: [["<|tool_call>"]],
  // Shapes without markers: a template may describe them in prose only.
  pythonic: [["func_name1("], ["[func_name"]],
  // Llama 3.2 and 3.3 describe it in words.
  bare_json: [["\"name\": function name, \"parameters\""]],
  llamacpp_envelope: []
}

/** Shapes without markers stay on whatever the template says: they are calls only as a whole answer. */
const ALWAYS: ReadonlyArray<TextFormat> = ["bare_json", "llamacpp_envelope"]

/**
 * The formats a chat template teaches (with the marker-less shapes beside them), or undefined when it teaches none
 * the edge knows: then every format stays active.
 */
export const formatsOfTemplate = (template: string): ReadonlyArray<TextFormat> | undefined => {
  const taught = TEXT_FORMATS.filter((format) =>
    SIGNATURES[format].some((pieces) => pieces.every((piece) => template.includes(piece)))
  )
  return taught.length === 0 ? undefined : [...taught, ...ALWAYS.filter((f) => !taught.includes(f))]
}
