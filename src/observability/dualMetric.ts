/**
 * A metric kept twice, under one name: in the edge's prom-client registry (what `/metrics` renders) and as an
 * Effect `Metric` (what an app's own exporter sees: Effect's metric registry, e.g. `@effect/opentelemetry`).
 * One update updates both; a label becomes an Effect metric tag of the same name.
 */
import * as Metric from "effect/Metric"
import * as MetricBoundaries from "effect/MetricBoundaries"
import * as MetricLabel from "effect/MetricLabel"
import { Counter, Gauge, Histogram, type Registry } from "prom-client"

type Labels<L extends string> = Readonly<Record<L, string>>

interface Spec<L extends string> {
  readonly name: string
  readonly help: string
  readonly labelNames?: ReadonlyArray<L>
}

/**
 * The Effect tags of a label set, one array per distinct set: Effect caches a metric's hook by the tag array's
 * identity, so a series found once is updated with two map lookups. As bounded as the prom-client series are.
 */
const tagCache = (): ((labels: Readonly<Record<string, string>>) => ReadonlyArray<MetricLabel.MetricLabel>) => {
  const cache = new Map<string, ReadonlyArray<MetricLabel.MetricLabel>>()
  return (labels) => {
    const entries = Object.entries(labels)
    const key = entries.map(([k, v]) => `${k}\u0000${v}`).join("\u0001")
    const found = cache.get(key)
    if (found !== undefined) return found
    const made = entries.map(([k, v]) => MetricLabel.make(k, v))
    cache.set(key, made)
    return made
  }
}

export interface DualCounter<L extends string> {
  readonly inc: (labels: Labels<L>, value?: number) => void
}

export const counter = <L extends string = never>(registry: Registry, spec: Spec<L>): DualCounter<L> => {
  const prom = new Counter({ name: spec.name, help: spec.help, labelNames: spec.labelNames ?? [], registers: [registry] })
  const effect = Metric.counter(spec.name, { description: spec.help })
  const tags = tagCache()
  return {
    inc: (labels, value = 1) => {
      prom.inc(labels, value)
      effect.unsafeUpdate(value, tags(labels))
    }
  }
}

export interface DualHistogram<L extends string> {
  readonly observe: (labels: Labels<L>, value: number) => void
}

export const histogram = <L extends string = never>(
  registry: Registry,
  spec: Spec<L> & { readonly buckets: ReadonlyArray<number> }
): DualHistogram<L> => {
  const prom = new Histogram({
    name: spec.name,
    help: spec.help,
    labelNames: spec.labelNames ?? [],
    buckets: [...spec.buckets],
    registers: [registry]
  })
  const effect = Metric.histogram(spec.name, MetricBoundaries.fromIterable(spec.buckets), spec.help)
  const tags = tagCache()
  return {
    observe: (labels, value) => {
      prom.observe(labels, value)
      effect.unsafeUpdate(value, tags(labels))
    }
  }
}

export interface DualGauge<L extends string> {
  readonly set: (labels: Labels<L>, value: number) => void
  readonly add: (labels: Labels<L>, delta: number) => void
  /** Forgets every series of `/metrics` (an Effect gauge keeps its last values: it cannot drop a tag set). */
  readonly reset: () => void
}

export const gauge = <L extends string = never>(registry: Registry, spec: Spec<L>): DualGauge<L> => {
  const prom = new Gauge({ name: spec.name, help: spec.help, labelNames: spec.labelNames ?? [], registers: [registry] })
  const effect = Metric.gauge(spec.name, { description: spec.help })
  const tags = tagCache()
  return {
    set: (labels, value) => {
      prom.set(labels, value)
      effect.unsafeUpdate(value, tags(labels))
    },
    add: (labels, delta) => {
      prom.inc(labels, delta)
      effect.unsafeModify(delta, tags(labels))
    },
    reset: () => prom.reset()
  }
}
