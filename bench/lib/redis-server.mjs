/**
 * redis-server processes owned by the benchmark: each on a free loopback port chosen by the
 * kernel, bound to 127.0.0.1 only, without persistence, in its own temporary directory, pinned to
 * the Redis CPU when pinning is in effect, and always stopped (normally, on error and on SIGINT).
 * It never uses a fixed port, so a Redis already running on 6379 is never touched.
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { connect, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { onCleanup } from "./cleanup.mjs";
import { onRedisCpu } from "./cpu.mjs";
import { sleep } from "./timing.mjs";

const HOST = "127.0.0.1";

/**
 * Asks the kernel for a free TCP port on 127.0.0.1 (listen on port 0, read it, close).
 * @returns {Promise<number>}
 */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", reject);
    server.listen(0, HOST, () => {
      const address = server.address();
      server.close(() => {
        if (address !== null && typeof address === "object") resolve(address.port);
        else reject(new Error("the kernel returned no port"));
      });
    });
  });
}

/** The installed redis-server version (e.g. "7.0.15"), or throws a clear error. */
export function redisServerVersion() {
  let output;
  try {
    output = execFileSync("redis-server", ["--version"], { encoding: "utf8" });
  } catch {
    throw new Error("redis-server was not found on PATH (Debian/Ubuntu: apt-get install redis-server)");
  }
  return /v=(\S+)/.exec(output)?.[1] ?? output.trim();
}

/** Resolves true once the server answers PING on `port`, false on a connection error. */
function ping(port) {
  return new Promise((resolve) => {
    const socket = connect({ host: HOST, port });
    let reply = "";
    const finish = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => finish(false));
    socket.once("error", () => finish(false));
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.on("data", (chunk) => {
      reply += chunk.toString("latin1");
      if (reply.includes("\r\n")) finish(reply.startsWith("+PONG"));
    });
  });
}

/**
 * A running redis-server child process.
 */
export class RedisServer {
  /** @type {number} */ port;
  /** @type {import("node:child_process").ChildProcess} */ #child;
  /** @type {string} */ #dir;
  /** @type {() => void} */ #unregister;

  constructor(port, child, dir, unregister) {
    this.port = port;
    this.#child = child;
    this.#dir = dir;
    this.#unregister = unregister;
  }

  /**
   * Starts a server on a free port and resolves once it answers PING. Retries with a new port
   * when another process grabbed the port in between.
   * @returns {Promise<RedisServer>}
   */
  static async start() {
    for (let attempt = 1; ; attempt++) {
      try {
        return await RedisServer.#startOnce(await freePort());
      } catch (error) {
        if (attempt >= 5) throw error;
      }
    }
  }

  static async #startOnce(port) {
    const dir = mkdtempSync(join(tmpdir(), "globallock-bench-redis-"));
    const args = ["--port", String(port), "--bind", HOST, "--save", "", "--appendonly", "no", "--dir", dir];
    const [command, argv] = onRedisCpu("redis-server", args);
    const child = spawn(command, argv, { stdio: ["ignore", "pipe", "pipe"] });
    let log = "";
    const keepLog = (chunk) => {
      log = (log + chunk.toString()).slice(-4000);
    };
    child.stdout.on("data", keepLog);
    child.stderr.on("data", keepLog);
    const kill = () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    };
    const unregister = onCleanup(kill);
    let exited = false;
    child.once("exit", () => {
      exited = true;
    });
    const deadline = Date.now() + 10_000;
    while (!(await ping(port))) {
      if (exited || Date.now() > deadline) {
        kill();
        unregister();
        throw new Error(`redis-server did not start on 127.0.0.1:${port}:\n${log}`);
      }
      await sleep(20);
    }
    return new RedisServer(port, child, dir, unregister);
  }

  /** Process id of redis-server. */
  get pid() {
    return this.#child.pid;
  }

  /** Stops the server (SIGTERM, then SIGKILL after 2 s) and removes its directory. */
  async stop() {
    const child = this.#child;
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 2000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(this.#dir, { recursive: true, force: true });
    this.#unregister();
  }
}
