/**
 * Records, with Redis MONITOR, every SET of a lock key with an acquisition token on a lock server,
 * including the SETs run inside Lua scripts (an acquisition SETs the key with a fresh token; an
 * extension may SET it again with the same one; a hand-off grant SETs it to the token the next
 * waiter registered; a `reserved:<waiter>` value of builds before the direct grant is not a token
 * and is left out). Each attachment
 * is one "generation": attach before a restart, attach again after it, and compare. A token SET in
 * a later generation that was already SET in an earlier one means something re-created a lock from
 * before the restart (an extension, say) instead of a fresh acquisition making a new token.
 */
import { Redis } from "ioredis";
import { now, sleep } from "./clock.mjs";

/** Prefix of a lock key's value while a release reserved it for the next waiter (builds before the direct grant). */
export const RESERVATION = "reserved:";

export class LockSetRecorder {
  /** @type {{ generation: number, key: string, token: string, source: string, at: number }[]} */
  sets = [];
  generation = -1;
  #connections = [];

  /**
   * @param {import("../../support/redis-server.mjs").RedisServer} server the lock server to watch
   * @param {string} prefix the lock key prefix
   */
  constructor(server, prefix) {
    this.server = server;
    this.prefix = prefix;
  }

  /**
   * Starts a new generation: connects (retrying every few ms until `timeoutMs`) and issues MONITOR.
   * The connection does not reconnect by itself: after a restart, call `attach` again.
   * Resolves to the time MONITOR was in place.
   */
  async attach(timeoutMs = 5000) {
    const generation = ++this.generation;
    const deadline = now() + timeoutMs;
    for (;;) {
      const client = new Redis({
        host: "127.0.0.1",
        port: this.server.port,
        lazyConnect: true,
        retryStrategy: () => null,
        maxRetriesPerRequest: 0,
      });
      client.on("error", () => undefined);
      this.#connections.push(client);
      try {
        await client.connect();
        const monitor = await client.monitor();
        monitor.on("error", () => undefined);
        this.#connections.push(monitor);
        monitor.on("monitor", (time, args, source) => this.#record(generation, time, args, source));
        return now();
      } catch (error) {
        client.disconnect();
        if (now() > deadline) throw new Error(`MONITOR could not attach: ${error?.message}`);
        await sleep(3);
      }
    }
  }

  #record(generation, time, args, source) {
    if (String(args[0]).toLowerCase() !== "set") return;
    const key = String(args[1]);
    if (!key.startsWith(this.prefix) || key.endsWith(":fence")) return;
    const token = String(args[2]);
    // A hand-off reservation names a waiter (one id per locker, SET again and again); it is not
    // an acquisition's token.
    if (token.startsWith(RESERVATION)) return;
    this.sets.push({ generation, key, token, source, at: Number(time) * 1000 });
  }

  /** Tokens SET during `generation`. */
  tokens(generation) {
    return new Set(this.sets.filter((s) => s.generation === generation).map((s) => s.token));
  }

  /** Disconnects every connection. */
  close() {
    for (const connection of this.#connections) connection.disconnect();
    this.#connections = [];
  }
}
