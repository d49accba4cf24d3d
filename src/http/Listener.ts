import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { Server } from "node:http"
import { Server as NetServer } from "node:net"

/** The edge's own listening socket, for the end of a drain (provided by `NodeServerLive`). */
export declare namespace Listener {
  export interface Service {
    /**
     * Stops accepting connections (once none arrived for a moment, at most
     * `timeout`); a connection still open keeps its handler, so its request is
     * answered (and the connection closed after it: the edge is draining).
     * Waits at most `timeout` more for every connection to close (true when
     * they did), then closes the idle ones left.
     */
    readonly close: (timeout: Duration.DurationInput) => Effect.Effect<boolean>
  }
}

export class Listener extends Context.Tag("@iop/edge/Listener")<Listener, Listener.Service>() {}

/** A connection accepted this recently means clients still arrive: the listener waits for a quiet moment. */
const QUIET_MS = 100

/**
 * Closes the listener once no connection has arrived for `QUIET_MS` (or at the deadline, `timeout`): a
 * client that reconnects after its last response (every answer while draining closes its connection) gets
 * a 503, not a reset from the kernel's accept queue. The decision is taken in the check phase, right after
 * the poll phase has accepted the connections waiting in that queue, so a busy event loop does not hide
 * them. (One that arrives after that instant is still reset by the kernel: no server can answer it.) It stops with net's `close`, not http's: http's also closes the idle connections at once, and a
 * connection just accepted whose request is not parsed yet counts as idle, so it would be reset. Those
 * are answered instead (503, `Connection: close`). Then it waits (at most `timeout` more) for the last
 * connection to go; http's `close` follows, for what is still idle and for its timeout timer.
 */
export const fromNodeServer = (server: Server): Listener.Service => {
  let lastConnection = 0
  server.on("connection", () => {
    lastConnection = Date.now()
  })
  return {
    close: (timeout) => {
      const ms = Duration.toMillis(timeout)
      return Effect.async<void>((resume) => {
        const deadline = Date.now() + ms
        let timer: ReturnType<typeof setTimeout> | undefined
        let immediate: ReturnType<typeof setImmediate> | undefined
        const check = () => {
          const wait = Math.min(lastConnection + QUIET_MS, deadline) - Date.now()
          if (wait > 0) {
            timer = setTimeout(() => {
              immediate = setImmediate(check)
            }, wait)
            return
          }
          // Calls back once the last connection is gone.
          NetServer.prototype.close.call(server, () => resume(Effect.void))
        }
        immediate = setImmediate(check)
        return Effect.sync(() => {
          clearTimeout(timer)
          clearImmediate(immediate)
        })
      }).pipe(
        Effect.timeoutOption(2 * ms),
        Effect.map(Option.isSome),
        Effect.ensuring(Effect.sync(() => server.close()))
      )
    }
  }
}
