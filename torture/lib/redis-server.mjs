/**
 * Real redis-server processes for the torture suite, runnable with plain `node` (no TypeScript):
 * each on a free 127.0.0.1 port chosen by the kernel (never 6379, never a fixed port), without
 * persistence, in its own temporary directory. Faults are real: SIGKILL, restart (empty, on the
 * same port), SIGSTOP and SIGCONT. Every server is registered with the cleanup backstop.
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createConnection, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { killHard, track } from "./cleanup.mjs";
import { sleep } from "./clock.mjs";

/** Throws a clear message when redis-server is not installed. */
export function assertRedisServerInstalled() {
  try {
    execFileSync("redis-server", ["--version"], { stdio: "ignore" });
  } catch {
    throw new Error(
      "redis-server was not found on PATH. The torture suite starts its own Redis processes; install it " +
        "(Debian/Ubuntu: `apt-get update && apt-get install -y redis-server`, macOS: `brew install redis`).",
    );
  }
}

/** Asks the kernel for a free TCP port on 127.0.0.1 (never the default Redis port). */
export async function freePort() {
  for (;;) {
    const port = await new Promise((resolve, reject) => {
      const server = createServer();
      server.unref();
      server.on("error", reject);
      server.listen(0, "127.0.0.1", () => {
        const address = server.address();
        server.close(() => resolve(address.port));
      });
    });
    if (port !== 6379) return port;
  }
}

/**
 * Client settings for code that must survive restarts: fail a command after one reconnection
 * attempt instead of queueing it for long, and reconnect every 50 ms.
 */
export const RESILIENT_CLIENT = Object.freeze({ maxRetriesPerRequest: 1, retryStrategy: () => 50 });

/** One redis-server child process. */
export class RedisServer {
  /** @type {import("node:child_process").ChildProcess | undefined} */
  process = undefined;
  /** Every pid this server has had (restarts start new processes). */
  pids = [];
  port;
  #dir;
  #stopped = false;

  constructor(port) {
    this.port = port;
    this.#dir = mkdtempSync(join(tmpdir(), "globallock-torture-"));
  }

  /** Starts a server on a free port and resolves once it answers PING. */
  static async start() {
    assertRedisServerInstalled();
    for (let attempt = 0; ; attempt++) {
      const server = new RedisServer(await freePort());
      try {
        await server.#spawn();
        return server;
      } catch (error) {
        await server.stop();
        if (attempt >= 4) throw error;
      }
    }
  }

  /** True while the process runs (paused counts as running). */
  get running() {
    const child = this.process;
    return child !== undefined && child.exitCode === null && child.signalCode === null;
  }

  /** A new ioredis client for this server; errors are swallowed (they surface as failed commands). */
  client(options = {}) {
    const client = new Redis({ host: "127.0.0.1", port: this.port, ...RESILIENT_CLIENT, ...options });
    client.on("error", () => undefined);
    return client;
  }

  /** Kills the process with SIGKILL (a crash: nothing is saved) and waits for it to exit. */
  async kill() {
    const child = this.process;
    if (child === undefined) return;
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      killHard(child);
      await exited;
    }
    this.process = undefined;
  }

  /** Kills the server and starts it again on the same port, empty (no persistence). */
  async restart() {
    await this.kill();
    for (let attempt = 0; ; attempt++) {
      try {
        await this.#spawn();
        return;
      } catch (error) {
        verbose(`restart of redis-server on ${this.port}, attempt ${attempt}, failed: ${error.message}`);
        // The port may still be in TIME_WAIT use by the kernel for a moment; try again briefly.
        await this.kill();
        if (attempt >= 20) throw error;
        await sleep(50);
      }
    }
  }

  /** Freezes the server (SIGSTOP): connections stay open, nothing is answered. */
  pause() {
    this.process?.kill("SIGSTOP");
  }

  /** Thaws a paused server (SIGCONT). */
  resume() {
    this.process?.kill("SIGCONT");
  }

  /** Stops the server for good and removes its directory. Idempotent. */
  async stop() {
    this.#stopped = true;
    await this.kill();
    rmSync(this.#dir, { recursive: true, force: true });
  }

  async #spawn() {
    if (this.#stopped) throw new Error("this server was stopped");
    const args = [
      "--port",
      String(this.port),
      "--bind",
      "127.0.0.1",
      "--save",
      "",
      "--appendonly",
      "no",
      "--dir",
      this.#dir,
      "--daemonize",
      "no",
      "--loglevel",
      "warning",
    ];
    const child = spawn("redis-server", args, { stdio: ["ignore", "ignore", "pipe"] });
    this.process = child;
    track(child);
    if (child.pid !== undefined) this.pids.push(child.pid);
    let stderr = "";
    // A failed spawn (or kill) is reported as an 'error' event: make it a failed start, not a crash.
    child.on("error", (error) => {
      stderr += `\n${error.message}`;
    });
    child.stderr.on("data", (chunk) => {
      stderr += chunk.toString();
    });
    await this.#waitUntilReady(child, () => stderr);
  }

  /** Polls with a raw socket every few ms (so the caller learns of readiness quickly), then PINGs. */
  async #waitUntilReady(child, stderr) {
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      if (child.pid === undefined) throw new Error(`redis-server could not be started: ${stderr()}`);
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`redis-server on port ${this.port} exited: ${stderr()}`);
      }
      if (await this.#answersPing()) return;
      await sleep(5);
    }
    throw new Error(`redis-server on port ${this.port} did not start: ${stderr()}`);
  }

  #answersPing() {
    return new Promise((resolve) => {
      const socket = createConnection({ host: "127.0.0.1", port: this.port });
      const done = (ok) => {
        socket.destroy();
        resolve(ok);
      };
      socket.setTimeout(500, () => done(false));
      socket.on("error", () => done(false));
      socket.on("connect", () => socket.write("PING\r\n"));
      socket.on("data", (data) => done(data.toString().startsWith("+PONG")));
    });
  }
}

function verbose(message) {
  if (process.env.TORTURE_VERBOSE) process.stderr.write(`[${new Date().toISOString()}] ${message}\n`);
}

/** Starts `count` independent servers. */
export async function startServers(count) {
  const results = await Promise.allSettled(Array.from({ length: count }, () => RedisServer.start()));
  const servers = results.filter((r) => r.status === "fulfilled").map((r) => r.value);
  const failure = results.find((r) => r.status === "rejected");
  if (failure) {
    await Promise.allSettled(servers.map((s) => s.stop()));
    throw failure.reason;
  }
  return servers;
}
