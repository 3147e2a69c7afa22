/**
 * The launcher of real MariaDB servers for the tests and the benchmark. Plain JavaScript (runnable
 * by `node`), typed for TypeScript by mariadb-server.d.mts.
 *
 * Every server is fresh: `mariadb-install-db` into its own temporary directory, then `mariadbd` on
 * a free 127.0.0.1 port chosen by the kernel (never the machine's own 3306), its Unix socket in
 * that directory, `root` without a password, no binary log, InnoDB flushing relaxed (a crash of the
 * server process keeps every commit; only an OS crash would not). It is stopped (and its directory
 * removed) by stop(), and killed when this process exits however that happens short of a signal
 * that kills Node itself. Run as root, it runs the server as root (`--user=root`).
 */
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import mysql from "mysql2/promise";
import { freePort as freeTcpPort, HOST } from "./postgres-server.mjs";

export { HOST };

const INSTALL_HINT =
  "The MySQL tests start their own MariaDB servers; install MariaDB " +
  "(Debian/Ubuntu: `apt-get update && apt-get install -y mariadb-server`, macOS: `brew install mariadb`).";

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Servers started and not stopped, killed by the exit backstop. */
const live = new Set();
let backstopInstalled = false;

/** Kills every server of this process still running and removes its directory (synchronous). */
export function killAllMariaDbServers() {
  for (const server of live) server.killSync();
}

function installBackstop() {
  if (backstopInstalled) return;
  backstopInstalled = true;
  process.once("exit", killAllMariaDbServers);
}

/** The path of `name` on PATH, else in /usr/sbin or /usr/bin; a clear message when it is missing. */
function binary(name) {
  try {
    const found = execFileSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8" }).trim();
    if (found !== "") return found;
  } catch {
    // not on PATH
  }
  for (const dir of ["/usr/sbin", "/usr/bin"]) if (existsSync(join(dir, name))) return join(dir, name);
  throw new Error(`${name} was not found on PATH or in /usr/sbin or /usr/bin. ${INSTALL_HINT}`);
}

/** The installed server version (e.g. "10.11.19"). */
export function mariaDbVersion() {
  const output = execFileSync(binary("mariadbd"), ["--version"], { encoding: "utf8" });
  return /Ver (\d+(?:\.\d+)*)/.exec(output)?.[1] ?? output.trim();
}

/** A free TCP port on 127.0.0.1, never 3306. */
export async function freePort() {
  for (;;) {
    const port = await freeTcpPort();
    if (port !== 3306) return port;
  }
}

const asRoot = typeof process.getuid === "function" && process.getuid() === 0;

/** One MariaDB server (a fresh data directory) on a free 127.0.0.1 port, in its own directory. */
export class MariaDbServer {
  /** @type {import("node:child_process").ChildProcess | undefined} */
  #child = undefined;
  #log = "";
  #stopped = false;
  #options;

  constructor(port, options) {
    this.port = port;
    this.#options = options;
    this.dir = mkdtempSync(join(tmpdir(), "globallock-mariadb-"));
    this.dataDir = join(this.dir, "data");
    this.socket = join(this.dir, "mariadb.sock");
    live.add(this);
    installBackstop();
  }

  /** Installs a data directory and starts a server on a free port; resolves once it answers. */
  static async start(options = {}) {
    binary("mariadbd");
    for (let attempt = 0; ; attempt++) {
      const server = new MariaDbServer(await freePort(), options);
      try {
        await server.#install();
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

  /** Process id of the server (undefined while stopped). */
  get pid() {
    return this.#child?.pid;
  }

  /** True while the server runs. */
  get running() {
    const child = this.#child;
    return child !== undefined && child.exitCode === null && child.signalCode === null;
  }

  /** Connection settings for `mysql2` (user `root`, database `globallock`, made at the start). */
  get connection() {
    return { host: HOST, port: this.port, user: "root", database: "globallock" };
  }

  /** The last few KB of the server's output. */
  log() {
    return this.#log;
  }

  /** A new `mysql2/promise` pool for this server. The caller ends it. */
  pool(options = {}) {
    return mysql.createPool({ ...this.connection, ...options });
  }

  /** Runs one SQL statement on a short-lived connection and returns its rows. */
  async query(text, values) {
    const connection = await mysql.createConnection({ ...this.connection, connectTimeout: 2000 });
    connection.on("error", () => undefined);
    try {
      const [rows] = await connection.query(text, values);
      return rows;
    } finally {
      await connection.end().catch(() => undefined);
    }
  }

  /** Kills the server (SIGKILL: a crash) and waits for it to exit. */
  async kill() {
    const child = this.#child;
    if (child === undefined) return;
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGKILL");
      await exited;
    }
    if (this.#child === child) this.#child = undefined;
  }

  /** A crash (SIGKILL: every connection is cut) and a start on the same port and data directory. */
  async restart() {
    await this.kill();
    for (let attempt = 0; ; attempt++) {
      try {
        await this.#spawn();
        return;
      } catch (error) {
        await this.kill();
        if (this.#stopped || attempt >= 20) throw error;
        await sleep(100);
      }
    }
  }

  /** Stops the server for good (SIGKILL) and removes its directory. Never rejects. */
  async stop() {
    this.#stopped = true;
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
    live.delete(this);
  }

  /** Synchronous kill and directory removal, for exit handlers. Prefer stop(). */
  killSync() {
    this.#stopped = true;
    try {
      this.#child?.kill("SIGKILL");
    } catch {
      // already gone
    }
    try {
      rmSync(this.dir, { recursive: true, force: true });
    } catch {
      // best effort in an exit handler
    }
    live.delete(this);
  }

  #keepLog(text) {
    this.#log = (this.#log + text).slice(-8000);
  }

  #run(command, args) {
    return new Promise((resolve, reject) => {
      const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
      child.stdout.on("data", (chunk) => this.#keepLog(chunk.toString()));
      child.stderr.on("data", (chunk) => this.#keepLog(chunk.toString()));
      child.once("error", reject);
      child.once("exit", (code) =>
        code === 0 ? resolve() : reject(new Error(`${command} failed (exit ${code}): ${this.#log}`)),
      );
    });
  }

  #install() {
    return this.#run(binary("mariadb-install-db"), [
      "--no-defaults",
      `--datadir=${this.dataDir}`,
      "--auth-root-authentication-method=normal",
      "--skip-test-db",
      ...(asRoot ? ["--user=root"] : []),
    ]);
  }

  async #spawn() {
    if (this.#stopped) throw new Error(`mariadbd on port ${this.port} was stopped`);
    const args = [
      "--no-defaults",
      `--datadir=${this.dataDir}`,
      `--port=${this.port}`,
      `--bind-address=${HOST}`,
      "--skip-networking=0",
      `--socket=${this.socket}`,
      `--pid-file=${join(this.dir, "mariadbd.pid")}`,
      "--skip-log-bin",
      "--innodb-buffer-pool-size=16M",
      "--innodb-log-file-size=8M",
      "--innodb-flush-log-at-trx-commit=2",
      "--skip-innodb-doublewrite",
      "--max-connections=200",
      ...(asRoot ? ["--user=root"] : []),
      ...(this.#options.args ?? []),
    ];
    const child = spawn(binary("mariadbd"), args, { stdio: ["ignore", "pipe", "pipe"] });
    this.#child = child;
    let spawnError;
    child.on("error", (error) => {
      spawnError = error;
    });
    child.stdout.on("data", (chunk) => this.#keepLog(chunk.toString()));
    child.stderr.on("data", (chunk) => this.#keepLog(chunk.toString()));
    const deadline = Date.now() + (this.#options.startTimeoutMs ?? 30_000);
    while (Date.now() < deadline) {
      if (spawnError !== undefined) throw new Error(`mariadbd could not be started: ${spawnError.message}`);
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`mariadbd on ${HOST}:${this.port} exited during start: ${this.#log}`);
      }
      if (await this.#ready()) return;
      await sleep(50);
    }
    throw new Error(`mariadbd on ${HOST}:${this.port} did not accept queries in time: ${this.#log}`);
  }

  async #ready() {
    try {
      const { database: _, ...server } = this.connection;
      const connection = await mysql.createConnection({ ...server, connectTimeout: 2000 });
      connection.on("error", () => undefined);
      await connection.query("CREATE DATABASE IF NOT EXISTS globallock").finally(() => connection.end());
      return true;
    } catch {
      return false;
    }
  }
}
