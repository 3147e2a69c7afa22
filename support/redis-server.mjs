/**
 * The one launcher of real redis-server processes for the tests, the benchmark and the torture
 * suite. Plain JavaScript (runnable by `node`), typed for TypeScript by redis-server.d.mts.
 *
 * Every server listens on a free 127.0.0.1 port chosen by the kernel (never a fixed port, never
 * 6379), runs without persistence in its own temporary directory, and is killed (and its directory
 * removed) when this process exits, however that happens short of a signal that kills Node itself
 * (entry points that want Ctrl-C covered install their own signal handler that calls
 * `process.exit`, or register the children through `onSpawn`). Faults are real: SIGKILL, restart
 * (empty, on the same port), SIGSTOP and SIGCONT.
 *
 * Also here: a Redis Cluster of masters (`startCluster`) and a Sentinel group (`startSentinelGroup`:
 * one master, replicas, three Sentinels).
 */
import { execFile, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createConnection } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { ExitBackstop, freePort as freeTcpPort, HOST, sleep } from "./server-process.mjs";

export { HOST };

/**
 * ioredis settings for clients that must survive kills and restarts: a command fails after one
 * reconnection attempt instead of queueing for long, and the client reconnects every 50 ms.
 */
export const RESILIENT_CLIENT = Object.freeze({ maxRetriesPerRequest: 1, retryStrategy: () => 50 });

const INSTALL_HINT =
  "The tests, the benchmark and the torture suite start their own Redis processes; install it " +
  "(Debian/Ubuntu: `apt-get update && apt-get install -y redis-server`, macOS: `brew install redis`).";

// ---------------------------------------------------------------------------------------------
// Process-wide backstop
// ---------------------------------------------------------------------------------------------

/** Servers whose directory still exists (started and not stopped). */
const live = new ExitBackstop();

/** Sends SIGCONT (so that a frozen process dies at once) and SIGKILL, ignoring a process that is gone. */
function killHard(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  try {
    child.kill("SIGCONT");
    child.kill("SIGKILL");
  } catch {
    // already gone
  }
}

/** Kills every server of this process still running and removes its directory (synchronous). */
export function killAllServers() {
  live.killAll();
}

// ---------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------

/** Throws a clear message when redis-server is not installed. */
export function assertRedisServerInstalled() {
  redisServerVersion();
}

/** The installed redis-server version (e.g. "7.0.15"); throws a clear error when it is missing. */
export function redisServerVersion() {
  let output;
  try {
    output = execFileSync("redis-server", ["--version"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
  } catch {
    throw new Error(`redis-server was not found on PATH. ${INSTALL_HINT}`);
  }
  return /v=(\S+)/.exec(output)?.[1] ?? output.trim();
}

/** Asks the kernel for a free TCP port on 127.0.0.1 (listen on port 0, read it, close); never 6379. */
export function freePort() {
  return freeTcpPort(6379);
}

/** Resolves true once something on `port` answers PING with +PONG, false otherwise (raw socket, no client). */
function answersPing(port) {
  return new Promise((resolve) => {
    const socket = createConnection({ host: HOST, port });
    let reply = "";
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once("error", () => done(false));
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.on("data", (chunk) => {
      reply += chunk.toString("latin1");
      if (reply.includes("\r\n")) done(reply.startsWith("+PONG"));
    });
  });
}

/** Normalizes the argument of `RedisServer.start` (an options object, or an array of extra args). */
function normalizeOptions(options) {
  if (options === undefined) return {};
  if (Array.isArray(options)) return { args: options };
  return options;
}

// ---------------------------------------------------------------------------------------------
// RedisServer
// ---------------------------------------------------------------------------------------------

/** One redis-server (or Sentinel) child process on a free 127.0.0.1 port, in its own directory. */
export class RedisServer {
  /** @type {import("node:child_process").ChildProcess | undefined} */
  #child = undefined;
  /** @type {number[]} */
  #pids = [];
  #log = "";
  #stopped = false;
  #paused = false;
  #options;

  /**
   * Use {@link RedisServer.start}.
   * @param {number} port
   * @param {object} options normalized start options
   */
  constructor(port, options) {
    this.port = port;
    this.#options = options;
    this.dir = mkdtempSync(join(tmpdir(), options.dirPrefix ?? "globallock-redis-"));
    this.sentinel = options.sentinel === true;
    this.configFile = undefined;
    live.add(this);
    if (options.config !== undefined || this.sentinel) {
      // Written once: a restart keeps what the server rewrote there (Sentinel records its state).
      this.configFile = join(this.dir, this.sentinel ? "sentinel.conf" : "redis.conf");
      const config = typeof options.config === "function" ? options.config({ port, dir: this.dir }) : options.config;
      writeFileSync(this.configFile, config ?? "");
    }
  }

  /**
   * Starts a server on a free port and resolves once it answers PING. Retries on a new port when
   * the start fails (e.g. another process grabbed the port in between).
   * @param {object | string[]} [options] start options, or (older form) extra redis-server args
   */
  static async start(options) {
    const normalized = normalizeOptions(options);
    assertRedisServerInstalled();
    for (let attempt = 0; ; attempt++) {
      const server = new RedisServer(await freePort(), normalized);
      try {
        await server.#spawn();
        return server;
      } catch (error) {
        await server.stop();
        if (attempt >= 4) throw error;
      }
    }
  }

  /** The current child process (undefined after kill()). */
  get process() {
    return this.#child;
  }

  /** Process id of the current redis-server (undefined while killed). */
  get pid() {
    return this.#child?.pid;
  }

  /** Every pid this server has had (a restart starts a new process). */
  get pids() {
    return [...this.#pids];
  }

  /** True while the process runs (a paused process counts as running). */
  get running() {
    const child = this.#child;
    return child !== undefined && child.exitCode === null && child.signalCode === null;
  }

  /** True between pause() and resume() (or kill). */
  get paused() {
    return this.#paused && this.running;
  }

  /** True once stop() was called. */
  get stopped() {
    return this.#stopped;
  }

  /** "127.0.0.1". */
  get host() {
    return HOST;
  }

  /** `redis://127.0.0.1:port`. */
  get url() {
    return `redis://${HOST}:${this.port}`;
  }

  /** The last few KB of the server's stdout and stderr (all its processes), for error messages. */
  log() {
    return this.#log;
  }

  /**
   * A new ioredis client for this server, with {@link RESILIENT_CLIENT} settings (fails fast while
   * the server is down) unless overridden; errors are swallowed (they surface as failed commands).
   * The caller disconnects it.
   */
  client(options = {}) {
    const client = new Redis({ host: HOST, port: this.port, ...RESILIENT_CLIENT, ...options });
    client.on("error", () => undefined);
    return client;
  }

  /** Kills the process with SIGKILL (a crash: nothing is saved) and waits for it to exit. */
  async kill() {
    const child = this.#child;
    if (child === undefined) return;
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      killHard(child);
      await exited;
    }
    if (this.#child === child) this.#child = undefined;
    this.#paused = false;
  }

  /**
   * Kills the server (if running) and starts it again on the same port, empty (no persistence).
   * Retries briefly when the port is not yet free again.
   */
  async restart() {
    await this.kill();
    for (let attempt = 0; ; attempt++) {
      try {
        await this.#spawn();
        return;
      } catch (error) {
        await this.kill();
        if (this.#stopped || attempt >= 20) throw error;
        await sleep(50);
      }
    }
  }

  /** Freezes the server (SIGSTOP): connections stay open, nothing is answered. */
  pause() {
    if (!this.running) return;
    this.#child?.kill("SIGSTOP");
    this.#paused = true;
  }

  /** Thaws a paused server (SIGCONT). */
  resume() {
    if (!this.running) return;
    this.#child?.kill("SIGCONT");
    this.#paused = false;
  }

  /**
   * Stops the server for good and removes its directory. Idempotent, never rejects. By default the
   * process is killed (SIGKILL); with the start option `stopSignal: "SIGTERM"` it gets SIGTERM and
   * is killed after 2 s if still running.
   */
  async stop() {
    this.#stopped = true;
    const child = this.#child;
    if (this.#options.stopSignal === "SIGTERM" && child !== undefined && this.running) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      if (this.#paused) child.kill("SIGCONT");
      child.kill("SIGTERM");
      const timer = setTimeout(() => killHard(child), 2000);
      await exited;
      clearTimeout(timer);
    }
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
    live.delete(this);
  }

  /** Synchronous SIGKILL and directory removal, for exit handlers. Prefer stop(). */
  killSync() {
    this.#stopped = true;
    if (this.#child !== undefined) killHard(this.#child);
    try {
      rmSync(this.dir, { recursive: true, force: true });
    } catch {
      // best effort in an exit handler
    }
    live.delete(this);
  }

  /** The command line: config file (if any), `--sentinel`, the defaults, then the caller's args. */
  #commandLine() {
    const args = [];
    if (this.configFile !== undefined) args.push(this.configFile);
    if (this.sentinel) args.push("--sentinel");
    args.push(
      "--port",
      String(this.port),
      "--bind",
      HOST,
      "--save",
      "",
      "--appendonly",
      "no",
      "--dir",
      this.dir,
      "--daemonize",
      "no",
      "--loglevel",
      this.#options.loglevel ?? "warning",
      ...(this.#options.args ?? []),
    );
    return this.#options.wrapCommand ? this.#options.wrapCommand("redis-server", args) : ["redis-server", args];
  }

  #keepLog(text) {
    this.#log = (this.#log + text).slice(-8000);
  }

  async #spawn() {
    if (this.#stopped) throw new Error(`redis-server on port ${this.port} was stopped`);
    const [command, args] = this.#commandLine();
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
    this.#child = child;
    this.#paused = false;
    if (child.pid !== undefined) this.#pids.push(child.pid);
    // A failed spawn is reported as an 'error' event: make it a failed start, not a crash.
    let spawnError;
    child.on("error", (error) => {
      spawnError = error;
      this.#keepLog(`\n${error.message}`);
    });
    child.stdout.on("data", (chunk) => this.#keepLog(chunk.toString()));
    child.stderr.on("data", (chunk) => this.#keepLog(chunk.toString()));
    const unregister = this.#options.onSpawn?.(child);
    if (typeof unregister === "function") child.once("exit", () => unregister());
    const deadline = Date.now() + (this.#options.startTimeoutMs ?? 10_000);
    while (Date.now() < deadline) {
      if (child.pid === undefined || spawnError !== undefined) {
        if (spawnError === undefined) await sleep(0); // the 'error' event comes on a later tick
        if (spawnError?.code === "ENOENT") {
          throw new Error(`${command} was not found on PATH.${command === "redis-server" ? ` ${INSTALL_HINT}` : ""}`);
        }
        throw new Error(`redis-server could not be started: ${this.#log}`);
      }
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`redis-server on 127.0.0.1:${this.port} exited during start: ${this.#log}`);
      }
      if (await answersPing(this.port)) return;
      await sleep(5);
    }
    throw new Error(`redis-server on 127.0.0.1:${this.port} did not start: ${this.#log}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Several servers, Cluster
// ---------------------------------------------------------------------------------------------

/**
 * Starts `count` independent servers with the same options. If one fails to start, the others are
 * stopped and the first error is thrown.
 * @param {number} count
 * @param {object | string[]} [options]
 */
export async function startServers(count, options) {
  const results = await Promise.allSettled(Array.from({ length: count }, () => RedisServer.start(options)));
  const servers = results.filter((r) => r.status === "fulfilled").map((r) => r.value);
  const failure = results.find((r) => r.status === "rejected");
  if (failure) {
    await stopServers(servers);
    throw failure.reason;
  }
  return servers;
}

/** Stops every server given (in parallel), never rejects. */
export async function stopServers(servers) {
  await Promise.allSettled(servers.filter(Boolean).map((server) => server.stop()));
}

/** Runs redis-cli with `args`, rejecting with its output on failure. */
function redisCli(args, timeoutMs) {
  return new Promise((resolve, reject) => {
    execFile("redis-cli", args, { timeout: timeoutMs, encoding: "utf8" }, (error, stdout, stderr) => {
      if (error) {
        const hint = error.code === "ENOENT" ? `redis-cli was not found on PATH. ${INSTALL_HINT}` : error.message;
        reject(new Error(`redis-cli ${args.join(" ")} failed: ${hint}\n${stdout}${stderr}`));
      } else resolve(stdout);
    });
  });
}

/**
 * Starts a Redis Cluster of `count` masters (no replicas) on free ports, assigns the slots with
 * `redis-cli --cluster create`, and resolves once every node reports `cluster_state:ok`. On failure
 * every node is stopped.
 * @param {number} [count] default 3
 * @param {object} [options] start options for every node (its `args` are added to the cluster ones)
 */
export async function startCluster(count = 3, options = {}) {
  const normalized = normalizeOptions(options);
  const servers = await startServers(count, {
    ...normalized,
    args: [
      "--cluster-enabled",
      "yes",
      "--cluster-config-file",
      "nodes.conf",
      "--cluster-node-timeout",
      "2000",
      ...(normalized.args ?? []),
    ],
  });
  try {
    await redisCli(
      ["--cluster", "create", ...servers.map((s) => `${HOST}:${s.port}`), "--cluster-replicas", "0", "--cluster-yes"],
      30_000,
    );
    const deadline = Date.now() + 20_000;
    for (const server of servers) {
      const probe = server.client();
      try {
        while (!String(await probe.cluster("INFO")).includes("cluster_state:ok")) {
          if (Date.now() > deadline) throw new Error("the cluster did not become ready within 20 s");
          await sleep(100);
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

// ---------------------------------------------------------------------------------------------
// Sentinel
// ---------------------------------------------------------------------------------------------

/** A flat RESP2 field/value array (as SENTINEL MASTER/REPLICAS return) as an object. */
function fields(flat) {
  const result = {};
  if (!Array.isArray(flat)) return result;
  for (let i = 0; i + 1 < flat.length; i += 2) result[String(flat[i])] = String(flat[i + 1]);
  return result;
}

/** Polls `check` every `everyMs` until it returns a value other than undefined, or throws on timeout. */
async function pollUntil(check, timeoutMs, what, everyMs = 50) {
  const deadline = Date.now() + timeoutMs;
  let lastError;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      throw new Error(`${what} within ${timeoutMs} ms${lastError ? ` (last error: ${lastError.message})` : ""}`);
    }
    await sleep(everyMs);
  }
}

/** Resolves with the `INFO replication` fields of a server. */
async function replicationInfo(client) {
  const info = await client.info("replication");
  return Object.fromEntries(
    info
      .split("\r\n")
      .filter((line) => line.includes(":"))
      .map((line) => [line.slice(0, line.indexOf(":")), line.slice(line.indexOf(":") + 1)]),
  );
}

/** The Sentinel configuration file for one Sentinel. */
function sentinelConfig({ port, dir, masterName, masterPort, quorum, downAfterMs, failoverTimeoutMs }) {
  return [
    `port ${port}`,
    `bind ${HOST}`,
    `dir ${dir}`,
    `sentinel monitor ${masterName} ${HOST} ${masterPort} ${quorum}`,
    `sentinel down-after-milliseconds ${masterName} ${downAfterMs}`,
    `sentinel failover-timeout ${masterName} ${failoverTimeoutMs}`,
    `sentinel parallel-syncs ${masterName} 1`,
    "",
  ].join("\n");
}

/**
 * Starts a Sentinel group on free loopback ports: one master, `replicas` replicas (`--replicaof`),
 * and `sentinels` Sentinels (`redis-server <conf> --sentinel`, each with a writable config file in
 * its own directory) monitoring the master as `masterName`. Resolves once every replica is in sync
 * (`master_link_status:up`) and every Sentinel knows every replica and the other Sentinels. On a
 * failed start everything started is stopped.
 * @param {object} [options] see SentinelGroupOptions in redis-server.d.mts
 */
export async function startSentinelGroup(options = {}) {
  const masterName = options.masterName ?? "mymaster";
  const replicaCount = options.replicas ?? 1;
  const sentinelCount = options.sentinels ?? 3;
  const quorum = options.quorum ?? Math.floor(sentinelCount / 2) + 1;
  const downAfterMs = options.downAfterMs ?? 500;
  const failoverTimeoutMs = options.failoverTimeoutMs ?? 2000;
  const readyTimeoutMs = options.readyTimeoutMs ?? 20_000;
  const serverOptions = normalizeOptions(options.serverOptions);
  // Full syncs start at once (the default waits 5 s for more replicas), also after a failover.
  const dataOptions = { ...serverOptions, args: ["--repl-diskless-sync-delay", "0", ...(serverOptions.args ?? [])] };
  const group = new SentinelGroup(masterName);
  try {
    const master = await RedisServer.start(dataOptions);
    group.master = master;
    group.servers.push(master);
    const replicas = await startServers(replicaCount, {
      ...dataOptions,
      args: ["--replicaof", HOST, String(master.port), ...dataOptions.args],
    });
    group.replicas.push(...replicas);
    group.servers.push(...replicas);
    await group.waitForReplication(master, readyTimeoutMs);
    // Sentinel rewrites its config file: each has its own, in its own directory.
    const sentinels = await startServers(sentinelCount, {
      ...serverOptions,
      sentinel: true,
      dirPrefix: "globallock-sentinel-",
      config: ({ port, dir }) =>
        sentinelConfig({ port, dir, masterName, masterPort: master.port, quorum, downAfterMs, failoverTimeoutMs }),
    });
    group.sentinels.push(...sentinels);
    group.masterPort = master.port;
    await group.waitForSentinels(readyTimeoutMs);
    return group;
  } catch (error) {
    await group.stop();
    throw error;
  }
}

/** A running Sentinel group; made by {@link startSentinelGroup}. */
class SentinelGroup {
  /** @type {RedisServer | undefined} */
  master = undefined;
  /** @type {RedisServer[]} */
  replicas = [];
  /** @type {RedisServer[]} */
  sentinels = [];
  /** Master and replicas. @type {RedisServer[]} */
  servers = [];
  /** Port of the master as last seen by this object (updated by waitForFailover). */
  masterPort = 0;
  #clients = new Set();
  #stopped = false;

  constructor(masterName) {
    this.masterName = masterName;
  }

  /** The Sentinels' ports. */
  get sentinelPorts() {
    return this.sentinels.map((sentinel) => sentinel.port);
  }

  /** The first replica started (convenience for one-replica groups). */
  get replica() {
    return this.replicas[0];
  }

  /** `[{ host: "127.0.0.1", port }, …]` for ioredis' `sentinels` option. */
  get sentinelAddresses() {
    return this.sentinels.map((sentinel) => ({ host: HOST, port: sentinel.port }));
  }

  #track(client) {
    this.#clients.add(client);
    client.once("end", () => this.#clients.delete(client));
    return client;
  }

  /**
   * A new ioredis client that finds the master through the Sentinels (`role: "master"` unless
   * overridden), with {@link RESILIENT_CLIENT} settings; errors are swallowed. Disconnected by stop().
   */
  client(options = {}) {
    const client = new Redis({
      sentinels: this.sentinelAddresses,
      name: this.masterName,
      ...RESILIENT_CLIENT,
      sentinelRetryStrategy: () => 50,
      ...options,
    });
    client.on("error", () => undefined);
    return this.#track(client);
  }

  /** A plain client to Sentinel number `index` (for SENTINEL commands). Disconnected by stop(). */
  sentinelClient(index = 0) {
    const sentinel = this.sentinels[index];
    if (sentinel === undefined) throw new Error(`no Sentinel #${index}`);
    return this.#track(sentinel.client());
  }

  /** The server (master or replica of this group) listening on `port`, if any. */
  serverOn(port) {
    return this.servers.find((server) => server.port === port);
  }

  /**
   * What each running Sentinel answers to `SENTINEL get-master-addr-by-name`, in Sentinel order
   * (undefined for a Sentinel that is down or does not answer).
   */
  async masterAddresses() {
    return Promise.all(
      this.sentinels.map(async (sentinel) => {
        if (!sentinel.running || sentinel.paused) return undefined;
        const client = sentinel.client({ lazyConnect: true, connectTimeout: 500, commandTimeout: 1000 });
        try {
          await client.connect();
          const reply = await client.call("SENTINEL", "get-master-addr-by-name", this.masterName);
          if (!Array.isArray(reply) || reply.length < 2) return undefined;
          return { host: String(reply[0]), port: Number(reply[1]) };
        } catch {
          return undefined;
        } finally {
          client.disconnect();
        }
      }),
    );
  }

  /**
   * Waits until every running Sentinel reports a master other than `from` (default: the master
   * this object last knew, at first the original master), all agreeing, and that server answers
   * `role:master`. Resolves with its address, the server, and how long the wait took.
   */
  async waitForFailover(options = {}) {
    const from = options.from ?? this.masterPort;
    const timeoutMs = options.timeoutMs ?? 30_000;
    const started = Date.now();
    const result = await pollUntil(
      async () => {
        const answers = (await this.masterAddresses()).filter((answer) => answer !== undefined);
        if (answers.length === 0) return undefined;
        const port = answers[0].port;
        if (port === from || !answers.every((answer) => answer.port === port)) return undefined;
        const server = this.serverOn(port);
        const probe = new Redis({ host: HOST, port, lazyConnect: true, connectTimeout: 500, commandTimeout: 1000 });
        probe.on("error", () => undefined);
        try {
          await probe.connect();
          if ((await replicationInfo(probe)).role !== "master") return undefined;
        } finally {
          probe.disconnect();
        }
        return { host: HOST, port, server };
      },
      timeoutMs,
      `the Sentinels did not agree on a new master (other than port ${from})`,
    );
    this.masterPort = result.port;
    return { ...result, elapsedMs: Date.now() - started };
  }

  /** Waits until every replica reports `master_link_status:up` to `master`. */
  async waitForReplication(master = this.serverOn(this.masterPort) ?? this.master, timeoutMs = 20_000) {
    const replicas = this.servers.filter((server) => server !== master && server.running);
    await Promise.all(
      replicas.map(async (replica) => {
        const probe = replica.client();
        try {
          await pollUntil(
            async () => {
              const info = await replicationInfo(probe);
              return info.master_link_status === "up" && Number(info.master_port) === master?.port ? true : undefined;
            },
            timeoutMs,
            `replica on port ${replica.port} did not sync with the master on port ${master?.port}`,
          );
        } finally {
          probe.disconnect();
        }
      }),
    );
  }

  /**
   * Waits until every Sentinel sees the master up (flags exactly "master"), knows every replica
   * (up, link ok) and the other Sentinels, so that a failover can start at once.
   */
  async waitForSentinels(timeoutMs = 20_000) {
    const replicaPorts = this.replicas.map((replica) => replica.port);
    await Promise.all(
      this.sentinels.map(async (sentinel) => {
        const probe = sentinel.client();
        try {
          await pollUntil(
            async () => {
              const master = fields(await probe.call("SENTINEL", "master", this.masterName));
              if (master.flags !== "master") return undefined;
              if (Number(master["num-other-sentinels"]) < this.sentinels.length - 1) return undefined;
              const known = (await probe.call("SENTINEL", "replicas", this.masterName)).map(fields);
              const ready = replicaPorts.every((port) =>
                known.some((r) => Number(r.port) === port && r.flags === "slave" && r["master-link-status"] === "ok"),
              );
              return ready ? true : undefined;
            },
            timeoutMs,
            `Sentinel on port ${sentinel.port} did not see the master, its replicas and the other Sentinels`,
            100,
          );
        } finally {
          probe.disconnect();
        }
      }),
    );
  }

  /** Disconnects the clients this object made, then stops every Sentinel and server. Never rejects. */
  async stop() {
    if (this.#stopped) return;
    this.#stopped = true;
    for (const client of this.#clients) client.disconnect();
    this.#clients.clear();
    await stopServers(this.sentinels);
    await stopServers(this.servers);
  }
}
