import * as http from "node:http"
import type { AddressInfo } from "node:net"

/**
 * An in-process OTLP/HTTP receiver (JSON encoding) on 127.0.0.1: it collects what is posted to `/v1/traces`, as a
 * collector would, and answers 200. The spans are read back flat, their attributes as plain values.
 */

export interface ReceivedSpan {
  readonly service: string
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | undefined
  readonly name: string
  /** OTLP's numbers: 1 internal, 2 server, 3 client. */
  readonly kind: number
  readonly attributes: Readonly<Record<string, unknown>>
  /** 1 ok, 2 error. */
  readonly status: { readonly code: number; readonly message?: string }
  readonly startTimeUnixNano: string
  readonly endTimeUnixNano: string
}

export interface OtlpReceiver {
  /** The base URL to configure as `telemetry.otlp.endpoint`. */
  readonly endpoint: string
  readonly spans: () => ReadonlyArray<ReceivedSpan>
  /** The headers of every export request. */
  readonly headers: Array<http.IncomingHttpHeaders>
  readonly close: () => Promise<void>
}

interface AnyValue {
  readonly stringValue?: string
  readonly intValue?: number | string
  readonly doubleValue?: number
  readonly boolValue?: boolean
  readonly arrayValue?: { readonly values: ReadonlyArray<AnyValue> }
}

const valueOf = (v: AnyValue): unknown =>
  v.arrayValue !== undefined
    ? v.arrayValue.values.map(valueOf)
    : v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : undefined) ?? v.doubleValue ?? v.boolValue

const attributesOf = (list: ReadonlyArray<{ readonly key: string; readonly value: AnyValue }> | undefined) =>
  Object.fromEntries((list ?? []).map(({ key, value }) => [key, valueOf(value)]))

interface ExportRequest {
  readonly resourceSpans: ReadonlyArray<{
    readonly resource: { readonly attributes: ReadonlyArray<{ readonly key: string; readonly value: AnyValue }> }
    readonly scopeSpans: ReadonlyArray<{
      readonly spans: ReadonlyArray<Omit<ReceivedSpan, "service" | "attributes"> & {
        readonly attributes: ReadonlyArray<{ readonly key: string; readonly value: AnyValue }>
      }>
    }>
  }>
}

export const startOtlpReceiver = async (): Promise<OtlpReceiver> => {
  const received: Array<ReceivedSpan> = []
  const headers: Array<http.IncomingHttpHeaders> = []
  const server = http.createServer((req, res) => {
    const body: Array<Buffer> = []
    req.on("data", (b: Buffer) => body.push(b))
    req.on("end", () => {
      if (req.method !== "POST" || req.url !== "/v1/traces") {
        res.writeHead(404).end()
        return
      }
      headers.push(req.headers)
      const data = JSON.parse(Buffer.concat(body).toString("utf8")) as ExportRequest
      for (const resource of data.resourceSpans) {
        const service = String(attributesOf(resource.resource.attributes)["service.name"])
        for (const scope of resource.scopeSpans) {
          for (const span of scope.spans) received.push({ ...span, service, attributes: attributesOf(span.attributes) })
        }
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}")
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans: () => received,
    headers,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      })
  }
}
