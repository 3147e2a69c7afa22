/**
 * The launcher of real Memcached servers for the tests and the benchmark. Plain JavaScript
 * (runnable by `node`), typed for TypeScript by memcached-server.d.mts.
 *
 * Every server is `memcached -p PORT -l 127.0.0.1 -U 0` on a free port chosen by the kernel (never
 * the machine's own 11211), UDP off; run as root, as `nobody` (`-u`, which memcached requires
 * then). Memcached keeps nothing on disk, so a restart starts empty. A server is stopped by stop(),
 * and killed when this process exits however that happens short of a signal that kills Node
 * itself.
 */
import { createConnection } from "node:net";
import Memcached from "memcached";
import { ExitBackstop, findBinary, freePort as freeTcpPort, HOST, ServerProcess } from "./server-process.mjs";

export { HOST };

const INSTALL_HINT =
  "The Memcached tests start their own servers; install Memcached " +
  "(Debian/Ubuntu: `apt-get update && apt-get install -y memcached`, macOS: `brew install memcached`).";

/** Servers started and not stopped, killed by the exit backstop. */
const live = new ExitBackstop();

/** Kills every server of this process still running (synchronous). */
export function killAllMemcachedServers() {
  live.killAll();
}

/** The `memcached` binary on PATH or in /usr/bin; a clear message when it is missing. */
export function memcachedBinary() {
  return findBinary("memcached", ["/usr/bin", "/usr/local/bin"], INSTALL_HINT);
}

/** A free TCP port on 127.0.0.1, never 11211. */
export function freePort() {
  return freeTcpPort(11211);
}

const asRoot = typeof process.getuid === "function" && process.getuid() === 0;

/**
 * Sends one line of Memcached's text protocol on a connection of its own and resolves with the
 * answer once it ends with one of `ends` (default: a line that ends any answer), or rejects after
 * `timeoutMs`.
 */
export function rawCommand(port, line, { timeoutMs = 2000 } = {}) {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host: HOST, port });
    let answer = "";
    const done = (error) => {
      socket.destroy();
      if (error === undefined) resolve(answer);
      else reject(error);
    };
    socket.setTimeout(timeoutMs, () => done(new Error(`memcached on ${HOST}:${port} did not answer "${line}"`)));
    socket.once("error", (error) => done(error));
    socket.once("connect", () => socket.write(`${line}\r\n`));
    socket.on("data", (chunk) => {
      answer += chunk.toString("latin1");
      if (
        /(^|\r\n)(END|OK|DELETED|NOT_FOUND|STORED|NOT_STORED|EXISTS|TOUCHED|ERROR|VERSION [^\r]*|(CLIENT|SERVER)_ERROR [^\r]*)\r\n$/.test(
          answer,
        )
      ) {
        done(undefined);
      }
    });
  });
}

/** One Memcached server on a free 127.0.0.1 port. */
export class MemcachedServer {
  #server = new ServerProcess("memcached");
  #options;

  constructor(port, options) {
    this.port = port;
    this.#options = options;
    live.add(this);
  }

  /** Starts a server on a free port and resolves once it answers `version`. */
  static async start(options = {}) {
    memcachedBinary();
    for (let attempt = 0; ; attempt++) {
      const server = new MemcachedServer(await freePort(), options);
      try {
        await server.#spawn();
        return server;
      } catch (error) {
        await server.stop();
        if (attempt >= 3) throw error;
      }
    }
  }

  /** "127.0.0.1". */
  get host() {
    return HOST;
  }

  /** `127.0.0.1:port`, the location a `memcached` client takes. */
  get location() {
    return `${HOST}:${this.port}`;
  }

  /** Process id of the server (undefined while killed). */
  get pid() {
    return this.#server.pid;
  }

  /** True while the server runs (a paused one counts as running). */
  get running() {
    return this.#server.running;
  }

  /** The last few KB of the server's output. */
  log() {
    return this.#server.log();
  }

  /** A new `memcached` client for this server with `options`. The caller ends it. */
  client(options = {}) {
    return new Memcached(this.location, options);
  }

  /** Sends one line of the text protocol (`flush_all`, `delete <key>`, `stats`) and resolves with the answer. */
  command(line) {
    return rawCommand(this.port, line);
  }

  /** Kills the server (SIGKILL: every item is lost) and waits for it to exit. */
  kill() {
    return this.#server.kill();
  }

  /** A crash and a start on the same port: the server comes back empty. */
  async restart() {
    await this.kill();
    await this.#server.respawn(() => this.#spawn());
  }

  /** Freezes the server (SIGSTOP): connections stay open, nothing is answered. */
  pause() {
    this.#server.signal("SIGSTOP");
  }

  /** Thaws a paused server (SIGCONT). */
  resume() {
    this.#server.signal("SIGCONT");
  }

  /** Stops the server for good (SIGKILL). Idempotent, never rejects. */
  async stop() {
    this.#server.stopped = true;
    this.#server.signal("SIGCONT");
    await this.#server.kill();
    live.delete(this);
  }

  /** Synchronous kill, for exit handlers. Prefer stop(). */
  killSync() {
    this.#server.signal("SIGCONT");
    this.#server.killSync();
    live.delete(this);
  }

  #spawn() {
    const args = [
      "-p",
      String(this.port),
      "-l",
      HOST,
      "-U",
      "0",
      ...(asRoot ? ["-u", "nobody"] : []),
      ...(this.#options.args ?? []),
    ];
    return this.#server.start(
      memcachedBinary(),
      args,
      {},
      {
        where: this.location,
        timeoutMs: this.#options.startTimeoutMs ?? 10_000,
        ready: () =>
          rawCommand(this.port, "version", { timeoutMs: 500 }).then(
            (answer) => answer.startsWith("VERSION"),
            () => false,
          ),
      },
    );
  }
}
