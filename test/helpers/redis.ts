/**
 * Real redis-server processes for tests: each on a free 127.0.0.1 port, without persistence, in
 * its own temporary directory, and always stopped (afterAll, and on process exit as a backstop).
 * Fault injection is real: kill, restart, SIGSTOP/SIGCONT.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis, type RedisOptions } from "ioredis";

const running = new Set<RedisServer>();
process.once("exit", () => {
  for (const server of running) server.process?.kill("SIGKILL");
});

/** Throws a clear message when redis-server is not installed. */
export function assertRedisServerInstalled(): void {
  try {
    execFileSync("redis-server", ["--version"], { stdio: "ignore" });
  } catch {
    throw new Error(
      "redis-server was not found on PATH. The tests start their own Redis processes; install it " +
        "(Debian/Ubuntu: `apt-get update && apt-get install -y redis-server`, macOS: `brew install redis`).",
    );
  }
}

/** Asks the kernel for a free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port")),
      );
    });
  });
}

/** One redis-server child process. */
export class RedisServer {
  process: ChildProcess | undefined;
  readonly port: number;
  readonly #dir: string;
  readonly #extraArgs: string[];

  private constructor(port: number, extraArgs: string[]) {
    this.port = port;
    this.#extraArgs = extraArgs;
    this.#dir = mkdtempSync(join(tmpdir(), "globallock-redis-"));
  }

  /** Starts a server on a free port and waits until it answers PING. */
  static async start(extraArgs: string[] = []): Promise<RedisServer> {
    assertRedisServerInstalled();
    for (let attempt = 0; ; attempt++) {
      const server = new RedisServer(await freePort(), extraArgs);
      try {
        await server.#spawn();
        return server;
      } catch (error) {
        await server.stop();
        if (attempt >= 4) throw error;
      }
    }
  }

  /** `redis://127.0.0.1:port`. */
  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** A new ioredis client for this server, failing fast while the server is down. */
  client(options: RedisOptions = {}): Redis {
    const settings: RedisOptions = {
      host: "127.0.0.1",
      port: this.port,
      maxRetriesPerRequest: 1,
      retryStrategy: () => 50,
      ...options,
    };
    const client = new Redis(settings as never); // ioredis 6 option types predate exactOptionalPropertyTypes
    client.on("error", () => undefined);
    return client;
  }

  /** Kills the process with SIGKILL (a crash: nothing is saved). */
  async kill(): Promise<void> {
    const child = this.process;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGCONT");
    child.kill("SIGKILL");
    await exited;
    this.process = undefined;
  }

  /** Starts the server again on the same port, empty (no persistence). */
  async restart(): Promise<void> {
    await this.kill();
    await this.#spawn();
  }

  /** Freezes the server (SIGSTOP): connections stay open, nothing answers. */
  pause(): void {
    this.process?.kill("SIGSTOP");
  }

  /** Thaws a paused server (SIGCONT). */
  resume(): void {
    this.process?.kill("SIGCONT");
  }

  /** Stops the server for good and removes its directory. */
  async stop(): Promise<void> {
    await this.kill();
    running.delete(this);
    rmSync(this.#dir, { recursive: true, force: true });
  }

  async #spawn(): Promise<void> {
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
      ...this.#extraArgs,
    ];
    const child = spawn("redis-server", args, { stdio: ["ignore", "ignore", "pipe"] });
    this.process = child;
    running.add(this);
    let stderr = "";
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    await this.#waitUntilReady(() => stderr);
  }

  async #waitUntilReady(stderr: () => string): Promise<void> {
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      if (this.process?.exitCode !== null && this.process?.exitCode !== undefined) {
        throw new Error(`redis-server on port ${this.port} exited: ${stderr()}`);
      }
      const probe = new Redis({ host: "127.0.0.1", port: this.port, lazyConnect: true, retryStrategy: () => null });
      probe.on("error", () => undefined);
      try {
        await probe.connect();
        if ((await probe.ping()) === "PONG") return;
      } catch {
        // not up yet
      } finally {
        probe.disconnect();
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    throw new Error(`redis-server on port ${this.port} did not start: ${stderr()}`);
  }
}

/** Starts `count` independent servers. */
export async function startServers(count: number, extraArgs: string[] = []): Promise<RedisServer[]> {
  return Promise.all(Array.from({ length: count }, () => RedisServer.start(extraArgs)));
}

/** Stops every server given, ignoring errors. */
export async function stopServers(servers: readonly RedisServer[]): Promise<void> {
  await Promise.allSettled(servers.map((server) => server.stop()));
}

/**
 * Starts a Redis Cluster of `count` masters (no replicas) on free ports, with its slots assigned,
 * and resolves once every node reports `cluster_state:ok`.
 */
export async function startCluster(count = 3): Promise<RedisServer[]> {
  const servers = await startServers(count, [
    "--cluster-enabled",
    "yes",
    "--cluster-config-file",
    "nodes.conf",
    "--cluster-node-timeout",
    "2000",
  ]);
  try {
    execFileSync(
      "redis-cli",
      ["--cluster", "create", ...servers.map((s) => `127.0.0.1:${s.port}`), "--cluster-replicas", "0", "--cluster-yes"],
      { stdio: "ignore", timeout: 30_000 },
    );
    const deadline = Date.now() + 20_000;
    for (const server of servers) {
      const probe = server.client();
      try {
        while (!String(await probe.cluster("INFO")).includes("cluster_state:ok")) {
          if (Date.now() > deadline) throw new Error("the cluster did not become ready");
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      } finally {
        probe.disconnect();
      }
    }
    return servers;
  } catch (error) {
    await stopServers(servers);
    throw error;
  }
}
