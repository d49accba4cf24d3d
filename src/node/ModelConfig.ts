import * as Schema from "effect/Schema"
import { modelOptionsFields } from "../protocol/ModelOptions.js"
import { ProviderConfig } from "../providers/ProviderConfig.js"

/** A model a node serves: its options and the built-in provider that runs it (a `models[]` entry of the config). */
export const ModelConfig = Schema.Struct({ ...modelOptionsFields, provider: ProviderConfig })
export type ModelConfig = typeof ModelConfig.Type
