/**
 * The launcher of real PostgreSQL servers for the tests and the benchmark. Plain JavaScript
 * (runnable by `node`), typed for TypeScript by postgres-server.d.mts.
 *
 * Every server is a fresh cluster: `initdb` into its own temporary directory, then `postgres` on a
 * free 127.0.0.1 port chosen by the kernel (never the machine's own 5432), trust authentication,
 * no Unix socket, fsync and full_page_writes off (a crash of the server process keeps every commit;
 * only an OS crash would not). It is stopped (and
 * its directory removed) by stop(), and killed when this process exits however that happens short
 * of a signal that kills Node itself. Run as root, `initdb` and `postgres` refuse to start: they
 * are then run as the `postgres` user, or a `globallock-pg` user created for the purpose.
 */
import { execFileSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import {
  ExitBackstop,
  freePort as freeTcpPort,
  HOST,
  killAndRemoveSync,
  ServerProcess,
  startWithRetries,
  stopAndRemove,
} from "./server-process.mjs";

export { HOST };

const INSTALL_HINT =
  "The PostgreSQL tests start their own servers; install PostgreSQL " +
  "(Debian/Ubuntu: `apt-get update && apt-get install -y postgresql`, macOS: `brew install postgresql`).";

/** Servers started and not stopped, killed by the exit backstop. */
const live = new ExitBackstop();

/** Kills every server of this process still running and removes its directory (synchronous). */
export function killAllPostgresServers() {
  live.killAll();
}

let binDirCache;

/**
 * The directory of `initdb` and `postgres`: the one on PATH, else the newest of
 * /usr/lib/postgresql/<version>/bin (where Debian puts them, off PATH). Throws a clear message
 * when PostgreSQL is not installed.
 */
export function postgresBinDir() {
  if (binDirCache !== undefined) return binDirCache;
  try {
    const initdb = execFileSync("sh", ["-c", "command -v initdb"], { encoding: "utf8" }).trim();
    if (initdb !== "") {
      binDirCache = join(initdb, "..");
      return binDirCache;
    }
  } catch {
    // not on PATH
  }
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((name) => existsSync(join(root, name, "bin", "initdb")))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0) throw new Error(`initdb was not found on PATH or under ${root}/*/bin. ${INSTALL_HINT}`);
  binDirCache = join(root, versions[0], "bin");
  return binDirCache;
}

/** The installed server version (e.g. "15.20"). */
export function postgresVersion() {
  const output = execFileSync(join(postgresBinDir(), "postgres"), ["--version"], { encoding: "utf8" });
  return /(\d+(?:\.\d+)*)/.exec(output)?.[1] ?? output.trim();
}

let runAsCache;

/**
 * `{ uid, gid }` of the user the server runs as when this process is root (PostgreSQL refuses
 * root), or `undefined` when it is not root. Uses `postgres` if it exists, else creates the
 * system user `globallock-pg`.
 */
function runAs() {
  if (runAsCache !== undefined) return runAsCache ?? undefined;
  if (typeof process.getuid !== "function" || process.getuid() !== 0) {
    runAsCache = null;
    return undefined;
  }
  const lookup = (name) => {
    try {
      const uid = Number(execFileSync("id", ["-u", name], { encoding: "utf8" }).trim());
      const gid = Number(execFileSync("id", ["-g", name], { encoding: "utf8" }).trim());
      return { uid, gid };
    } catch {
      return undefined;
    }
  };
  let user = lookup("postgres") ?? lookup("globallock-pg");
  if (user === undefined) {
    execFileSync("useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "globallock-pg"]);
    user = lookup("globallock-pg");
  }
  if (user === undefined) throw new Error("could not find or create an unprivileged user to run PostgreSQL as");
  runAsCache = user;
  return user;
}

/** Asks the kernel for a free TCP port on 127.0.0.1 (never 5432). */
export function freePort() {
  return freeTcpPort(5432);
}

/** One PostgreSQL server (a fresh cluster) on a free 127.0.0.1 port, in its own directory. */
export class PostgresServer {
  // Its own process group, so that a kill reaches the backends too.
  #server = new ServerProcess("postgres", true);
  #options;

  constructor(port, options) {
    this.port = port;
    this.#options = options;
    this.dir = mkdtempSync(join(tmpdir(), "globallock-pg-"));
    this.dataDir = join(this.dir, "data");
    live.add(this);
  }

  /**
   * Runs `initdb` and starts a server on a free port; resolves once it accepts queries. Retries
   * on another port if the start fails.
   */
  static async start(options = {}) {
    postgresBinDir();
    return startWithRetries(
      async () => new PostgresServer(await freePort(), options),
      async (server) => {
        await server.#init();
        await server.#spawn();
      },
    );
  }

  /** "127.0.0.1". */
  get host() {
    return HOST;
  }

  /** Process id of the postmaster (undefined while stopped). */
  get pid() {
    return this.#server.pid;
  }

  /** True while the postmaster runs. */
  get running() {
    return this.#server.running;
  }

  /** Connection settings for `pg.Client` and `pg.Pool` (user `postgres`, database `postgres`). */
  get connection() {
    return { host: HOST, port: this.port, user: "postgres", database: "postgres" };
  }

  /** `postgres://postgres@127.0.0.1:port/postgres`. */
  get url() {
    return `postgres://postgres@${HOST}:${this.port}/postgres`;
  }

  /** The last few KB of the server's output. */
  log() {
    return this.#server.log();
  }

  /** A new `pg.Pool` for this server (errors of idle clients swallowed). The caller ends it. */
  pool(options = {}) {
    return poolOf(this.connection, options);
  }

  /** Runs one SQL statement on a short-lived connection and returns its rows. */
  async query(text, values) {
    const client = new pg.Client(this.connection);
    client.on("error", () => undefined);
    await client.connect();
    try {
      return (await client.query(text, values)).rows;
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  /** Kills the postmaster and every backend (SIGKILL: a crash) and waits for the postmaster to exit. */
  kill() {
    return this.#server.kill();
  }

  /**
   * Restarts the server on the same port and data directory: an immediate shutdown (SIGQUIT, every
   * session is cut), then a start (crash recovery keeps committed data, sequences included).
   */
  async restart() {
    const child = this.#server.child;
    if (child !== undefined && this.running) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGQUIT");
      const timer = setTimeout(() => this.#server.signal("SIGKILL"), 5000);
      await exited;
      clearTimeout(timer);
      this.#server.signal("SIGKILL");
    }
    this.#server.child = undefined;
    await this.#server.respawn(() => this.#spawn());
  }

  /** Stops the server for good (SIGKILL of its process group) and removes its directory. Never rejects. */
  stop() {
    return stopAndRemove(this.#server, this.dir, live, this);
  }

  /** Synchronous kill and directory removal, for exit handlers. Prefer stop(). */
  killSync() {
    killAndRemoveSync(this.#server, this.dir, live, this);
  }

  /** Options for spawn: run as the unprivileged user when root. */
  #processOptions() {
    const user = runAs();
    return user === undefined ? {} : { uid: user.uid, gid: user.gid };
  }

  async #init() {
    const user = runAs();
    if (user !== undefined) chownSync(this.dir, user.uid, user.gid);
    await this.#server.runTool(
      join(postgresBinDir(), "initdb"),
      ["-D", this.dataDir, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"],
      this.#processOptions(),
    );
  }

  #spawn() {
    const args = [
      "-D",
      this.dataDir,
      "-p",
      String(this.port),
      "-c",
      `listen_addresses=${HOST}`,
      "-c",
      "unix_socket_directories=",
      "-c",
      "fsync=off",
      "-c",
      "full_page_writes=off",
      "-c",
      "max_connections=100",
      "-c",
      "shared_buffers=16MB",
      "-c",
      "log_min_messages=fatal",
      ...(this.#options.args ?? []),
    ];
    return this.#server.start(join(postgresBinDir(), "postgres"), args, this.#processOptions(), {
      where: `${HOST}:${this.port}`,
      timeoutMs: this.#options.startTimeoutMs ?? 20_000,
      ready: () => this.#ready(),
    });
  }

  #ready() {
    return answersQueries(this.connection);
  }
}

/** A new `pg.Pool` on `connection` (a server or a pooler; errors of idle clients swallowed). */
export function poolOf(connection, options = {}) {
  const pool = new pg.Pool({ ...connection, ...options });
  pool.on("error", () => undefined);
  return pool;
}

/** Whether a server (or a pooler) at `connection` answers `SELECT 1` on a new connection. */
export async function answersQueries(connection) {
  const client = new pg.Client({ ...connection, connectionTimeoutMillis: 1000 });
  client.on("error", () => undefined);
  try {
    await client.connect();
    await client.query("SELECT 1");
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Starts `count` independent servers; if one fails, the others are stopped and the error is thrown. */
export async function startPostgresServers(count, options) {
  const results = await Promise.allSettled(Array.from({ length: count }, () => PostgresServer.start(options)));
  const failed = results.find((result) => result.status === "rejected");
  if (failed !== undefined) {
    await Promise.all(results.map((result) => (result.status === "fulfilled" ? result.value.stop() : undefined)));
    throw failed.reason;
  }
  return results.map((result) => result.value);
}
