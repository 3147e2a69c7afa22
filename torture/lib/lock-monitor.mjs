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
import { connect } from "node:net";
import { now, sleep } from "./clock.mjs";

/** Prefix of a lock key's value while a release reserved it for the next waiter (builds before the direct grant). */
export const RESERVATION = "reserved:";

export class LockSetRecorder {
  /** @type {{ generation: number, key: string, token: string, source: string, at: number }[]} */
  sets = [];
  generation = -1;
  /** @type {import("node:net").Socket[]} */
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
   *
   * MONITOR runs on a plain socket, not on ioredis: ioredis only treats replies as monitor lines
   * once a promise callback has run after MONITOR's `+OK`, so monitor lines that arrive in the same
   * TCP read as the `+OK` (likely on a busy server or a loaded machine) went to its command queue,
   * which is empty, and each one became an uncaught "Command queue state error" (and was not
   * recorded). Here one parser reads the `+OK` and every line after it, in order.
   */
  async attach(timeoutMs = 5000) {
    const generation = ++this.generation;
    const deadline = now() + timeoutMs;
    for (;;) {
      try {
        await this.#monitor(generation);
        return now();
      } catch (error) {
        if (now() > deadline) throw new Error(`MONITOR could not attach: ${error?.message}`);
        await sleep(3);
      }
    }
  }

  /** Opens one MONITOR connection; resolves once Redis answered `+OK`, rejects if it did not. */
  #monitor(generation) {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: "127.0.0.1", port: this.server.port });
      this.#connections.push(socket);
      socket.setEncoding("utf8");
      let monitoring = false;
      let buffer = "";
      const fail = (error) => {
        socket.destroy();
        reject(error);
      };
      // Errors and the end of the connection (the server was killed or restarted) are expected:
      // before `+OK` they fail this attempt, after it they end this generation.
      socket.on("error", (error) => {
        if (!monitoring) fail(error);
      });
      socket.on("close", () => {
        if (!monitoring) fail(new Error("connection closed before MONITOR was in place"));
      });
      socket.on("connect", () => socket.write("MONITOR\r\n"));
      socket.on("data", (chunk) => {
        buffer += chunk;
        let end = buffer.indexOf("\r\n");
        while (end !== -1) {
          const line = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          end = buffer.indexOf("\r\n");
          if (monitoring) {
            const entry = parseMonitorLine(line);
            if (entry) this.#record(generation, entry.time, entry.args, entry.source);
          } else if (line === "+OK") {
            monitoring = true;
            resolve();
          } else {
            fail(new Error(`MONITOR answered ${line}`));
            return;
          }
        }
      });
    });
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
    for (const connection of this.#connections) connection.destroy();
    this.#connections = [];
  }
}

const ESCAPES = { n: "\n", r: "\r", t: "\t", a: "\x07", b: "\b", '"': '"', "\\": "\\" };

/**
 * Parses one MONITOR line, `+<seconds.micros> [<db> <source>] "arg" "arg" …` (source is the
 * client's address, or `lua` for a command run by a script); arguments are quoted with Redis's
 * escapes (`\"`, `\\`, `\n`, `\xHH`…). Returns undefined for a line of another shape.
 */
export function parseMonitorLine(line) {
  const match = /^\+(\d+\.\d+) \[(\d+) ([^\]]*)\] /.exec(line);
  if (!match) return undefined;
  const args = [];
  let i = match[0].length;
  while (i < line.length) {
    if (line[i] === " ") {
      i++;
      continue;
    }
    if (line[i] !== '"') return undefined;
    let arg = "";
    for (i++; i < line.length && line[i] !== '"'; i++) {
      if (line[i] !== "\\") {
        arg += line[i];
      } else if (line[i + 1] === "x") {
        arg += String.fromCharCode(Number.parseInt(line.slice(i + 2, i + 4), 16));
        i += 3;
      } else {
        arg += ESCAPES[line[i + 1]] ?? line[i + 1];
        i++;
      }
    }
    if (i >= line.length) return undefined;
    i++;
    args.push(arg);
  }
  return { time: match[1], db: match[2], source: match[3], args };
}
