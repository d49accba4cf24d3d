/**
 * Per-element cost of the Effect Stream operators on the edge's relay path,
 * on one-element chunks (what a token-by-token upstream produces). Not part
 * of `npm run bench`; run `node --expose-gc dist-bench/bench/operators.js [N]`
 * after it to see why a pipeline costs what it does.
 */
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"

type Stage = (self: Stream.Stream<number, string>) => Stream.Stream<unknown, string>

const never = () => Deferred.await(Effect.runSync(Deferred.make<never>()))

const stages: ReadonlyArray<readonly [string, Stage]> = [
  ["map (reference)", (s) => s.pipe(Stream.map((x) => x + 1))],
  ["interruptWhen(Deferred.await)", (s) => s.pipe(Stream.interruptWhen(never()))],
  ["timeoutFail(10 min)", (s) => s.pipe(Stream.timeoutFail(() => "idle", Duration.minutes(10)))],
  ["haltWhen(Deferred.await)", (s) => s.pipe(Stream.haltWhen(never()))],
  ["mapAccum + flattenIterables", (s) => s.pipe(Stream.mapAccum(0, (n, x) => [n + 1, [x]]), Stream.flattenIterables)],
  ["mapAccum + mapConcat", (s) => s.pipe(Stream.mapAccum(0, (n, x) => [n + 1, [x]]), Stream.mapConcat((xs) => xs))],
  ["concat + takeUntil + catchAll", (s) => s.pipe(Stream.concat(Stream.make(-1)), Stream.takeUntil((x) => x < 0), Stream.catchAll(() => Stream.empty))]
]

const source = (n: number): Stream.Stream<number, string> =>
  Stream.fromIterable(Array.from({ length: n }, (_, i) => i)).pipe(Stream.rechunk(1))

const drain = (stage: Stage, n: number) => Effect.runPromise(Stream.runDrain(stage(source(n))))

const main = async () => {
  const n = Number(process.argv[2] ?? "256")
  const reps = Math.max(1, Math.round(20_000 / n))
  process.stdout.write(`${n}-element streams of one-element chunks, ${reps} per stage; CPU µs per element\n`)
  for (const [name, stage] of stages) {
    for (let i = 0; i < 5; i++) await drain(stage, 2_000)
    ;(globalThis as { gc?: () => void }).gc?.()
    const before = process.cpuUsage()
    for (let i = 0; i < reps; i++) await drain(stage, n)
    const used = process.cpuUsage(before)
    process.stdout.write(`${name.padEnd(32)} ${((used.user + used.system) / (n * reps)).toFixed(1).padStart(8)}\n`)
  }
}

void main()
