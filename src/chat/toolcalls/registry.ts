/** The enabled text formats, as the hold-back scanner sees them: open hints, how their blocks end, and parsers. */
import { apertus } from "./apertus.js"
import { bareJson } from "./bareJson.js"
import type { BareFormat, BlockResult, ScannedFormat, TagFormat } from "./block.js"
import { cohere } from "./cohere.js"
import { deepseekV3 } from "./deepseek.js"
import { deepseekV32, deepseekV4 } from "./deepseekDsml.js"
import { functionaryV31 } from "./functionaryV31.js"
import { functionGemma, gemma4 } from "./gemmaCall.js"
import { glm45, glm47 } from "./glm.js"
import { granite } from "./granite.js"
import { hy3 } from "./hy3.js"
import { kimiK2 } from "./kimiK2.js"
import { kimiK3 } from "./kimiK3.js"
import { llama3Json } from "./llama3Json.js"
import { llamacppEnvelope } from "./llamacppEnvelope.js"
import { minimaxM1 } from "./minimaxM1.js"
import { minimaxM2 } from "./minimaxM2.js"
import { mistral } from "./mistral.js"
import { mustache } from "./mustache.js"
import { nemotron } from "./nemotron.js"
import { lfm2, llama4Pythonic, olmo3, pythonic } from "./pythonicFormats.js"
import { qwen3Xml } from "./qwen3Xml.js"
import { seedOss } from "./seedOss.js"
import type { RequestTool, TextFormat } from "./types.js"
import { xml } from "./xml.js"

/** A block that ends at a close tag (or at the next open tag, or at the end of the stream). */
export interface TagOpener {
  readonly _tag: "Tag"
  readonly open: string
  readonly close: string
  readonly committed: number
  readonly parse: (body: string, closed: boolean, tools: ReadonlyArray<RequestTool>) => BlockResult
}

/** A block that ends where the format's incremental scan says so. */
export interface ScannedOpener {
  readonly _tag: "Scanned"
  readonly open: string
  readonly committed: number
  readonly format: ScannedFormat
}

export type Opener = TagOpener | ScannedOpener

export interface Registry {
  readonly openers: ReadonlyArray<Opener>
  /** The enabled shapes without markers, each a call only when it is the whole response. */
  readonly bare: ReadonlyArray<BareFormat>
}

const TAG_FORMATS: ReadonlyArray<TagFormat> = [
  xml,
  qwen3Xml,
  mustache,
  llama3Json,
  cohere,
  apertus,
  nemotron,
  functionaryV31,
  deepseekV3,
  kimiK2,
  glm45,
  glm47,
  minimaxM2,
  minimaxM1,
  seedOss,
  deepseekV32,
  deepseekV4,
  kimiK3,
  hy3,
  llama4Pythonic,
  olmo3,
  lfm2,
  functionGemma,
  gemma4
]
const SCANNED_FORMATS: ReadonlyArray<ScannedFormat> = [mistral, granite]
const BARE_FORMATS: ReadonlyArray<BareFormat> = [bareJson, llamacppEnvelope, pythonic]

/**
 * Formats that share an open tag (xml and qwen3_xml) form one opener, told apart by the block's body. Once one of
 * them is enabled the tag is markup, so a body of the other shape is still parsed rather than called malformed.
 */
const tagOpener = (enabled: ReadonlyArray<TagFormat>, open: string): TagOpener | undefined => {
  const first = enabled.find((f) => f.open === open)
  if (first === undefined) return undefined
  const family = [...enabled, ...TAG_FORMATS].filter((f) => f.open === open)
  return {
    _tag: "Tag",
    open,
    close: first.close,
    committed: first.committed,
    parse: (body, closed, tools) => (family.find((f) => f.claims(body)) ?? first).parse(body, closed, tools)
  }
}

export const registry = (formats: ReadonlyArray<TextFormat>): Registry => {
  const enabledTags = TAG_FORMATS.filter((f) => formats.includes(f.format))
  const opens = [...new Set(enabledTags.map((f) => f.open))]
  const tags = opens.flatMap((open) => tagOpener(enabledTags, open) ?? [])
  const scanned = SCANNED_FORMATS.filter((f) => formats.includes(f.format)).map(
    (format): ScannedOpener => ({ _tag: "Scanned", open: format.open, committed: format.committed, format })
  )
  return { openers: [...tags, ...scanned], bare: BARE_FORMATS.filter((f) => formats.includes(f.format)) }
}

/** The formats with markers of their own: the ones read anywhere in a text, not only as a whole response. */
export const withMarkers = (formats: ReadonlyArray<TextFormat>): ReadonlyArray<TextFormat> =>
  formats.filter((f) => !BARE_FORMATS.some((bare) => bare.format === f))
