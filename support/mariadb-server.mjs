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
import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import mysql from "mysql2/promise";
import {
  ExitBackstop,
  findBinary,
  freePort as freeTcpPort,
  HOST,
  killAndRemoveSync,
  ServerProcess,
  startWithRetries,
  stopAndRemove,
} from "./server-process.mjs";

export { HOST };

const INSTALL_HINT =
  "The MySQL tests start their own MariaDB servers; install MariaDB " +
  "(Debian/Ubuntu: `apt-get update && apt-get install -y mariadb-server`, macOS: `brew install mariadb`).";

/** Servers started and not stopped, killed by the exit backstop. */
const live = new ExitBackstop();

/** Kills every server of this process still running and removes its directory (synchronous). */
export function killAllMariaDbServers() {
  live.killAll();
}

/** The path of `name` on PATH, else in /usr/sbin or /usr/bin; a clear message when it is missing. */
const binary = (name) => findBinary(name, ["/usr/sbin", "/usr/bin"], INSTALL_HINT);

/** The installed server version (e.g. "10.11.19"). */
export function mariaDbVersion() {
  const output = execFileSync(binary("mariadbd"), ["--version"], { encoding: "utf8" });
  return /Ver (\d+(?:\.\d+)*)/.exec(output)?.[1] ?? output.trim();
}

/** A free TCP port on 127.0.0.1, never 3306. */
export function freePort() {
  return freeTcpPort(3306);
}

const asRoot = typeof process.getuid === "function" && process.getuid() === 0;

/** One MariaDB server (a fresh data directory) on a free 127.0.0.1 port, in its own directory. */
export class MariaDbServer {
  #server = new ServerProcess("mariadbd");
  #options;

  constructor(port, options) {
    this.port = port;
    this.#options = options;
    this.dir = mkdtempSync(join(tmpdir(), "globallock-mariadb-"));
    this.dataDir = join(this.dir, "data");
    this.socket = join(this.dir, "mariadb.sock");
    live.add(this);
  }

  /** Installs a data directory and starts a server on a free port; resolves once it answers. */
  static async start(options = {}) {
    binary("mariadbd");
    return startWithRetries(
      async () => new MariaDbServer(await freePort(), options),
      async (server) => {
        await server.#install();
        await server.#spawn();
      },
    );
  }

  /** "127.0.0.1". */
  get host() {
    return HOST;
  }

  /** Process id of the server (undefined while stopped). */
  get pid() {
    return this.#server.pid;
  }

  /** True while the server runs. */
  get running() {
    return this.#server.running;
  }

  /** Connection settings for `mysql2` (user `root`, database `globallock`, made at the start). */
  get connection() {
    return { host: HOST, port: this.port, user: "root", database: "globallock" };
  }

  /** The last few KB of the server's output. */
  log() {
    return this.#server.log();
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
  kill() {
    return this.#server.kill();
  }

  /** A crash (SIGKILL: every connection is cut) and a start on the same port and data directory. */
  async restart() {
    await this.kill();
    await this.#server.respawn(() => this.#spawn());
  }

  /** Stops the server for good (SIGKILL) and removes its directory. Never rejects. */
  stop() {
    return stopAndRemove(this.#server, this.dir, live, this);
  }

  /** Synchronous kill and directory removal, for exit handlers. Prefer stop(). */
  killSync() {
    killAndRemoveSync(this.#server, this.dir, live, this);
  }

  #install() {
    return this.#server.runTool(binary("mariadb-install-db"), [
      "--no-defaults",
      `--datadir=${this.dataDir}`,
      "--auth-root-authentication-method=normal",
      "--skip-test-db",
      ...(asRoot ? ["--user=root"] : []),
    ]);
  }

  #spawn() {
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
    return this.#server.start(
      binary("mariadbd"),
      args,
      {},
      {
        where: `${HOST}:${this.port}`,
        timeoutMs: this.#options.startTimeoutMs ?? 30_000,
        ready: () => this.#ready(),
      },
    );
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
