import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Layer from "effect/Layer"
import { createServer } from "node:http"
import { AppLive } from "./app.js"

const port = Number(process.env["PORT"] ?? "3000")
Layer.launch(AppLive.pipe(Layer.provide(NodeHttpServer.layer(createServer, { port })))).pipe(NodeRuntime.runMain)
