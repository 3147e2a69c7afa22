/**
 * The launcher of real PgBouncer poolers for the tests: one `pgbouncer` on a free 127.0.0.1 port in
 * front of a PostgreSQL server the test started, in the pool mode the test asks for. Plain
 * JavaScript (runnable by `node`), typed for TypeScript by pgbouncer-server.d.mts.
 *
 * PgBouncer refuses to run as root: as root it runs as the `postgres` user (Debian's PostgreSQL
 * package creates it), with its directory owned by that user. Trust authentication, no Unix socket;
 * `pg` sends startup parameters PgBouncer does not know, which it is told to ignore. Stopped (and
 * its directory removed) by stop(), and killed when this process exits.
 */
import { execFileSync } from "node:child_process";
import { chownSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { answersQueries, poolOf } from "./postgres-server.mjs";
import {
  ExitBackstop,
  findBinary,
  freePort,
  HOST,
  killAndRemoveSync,
  ServerProcess,
  startWithRetries,
  stopAndRemove,
} from "./server-process.mjs";

const INSTALL_HINT =
  "The pooler tests start their own PgBouncer; install it (Debian/Ubuntu: `apt-get update && apt-get install -y pgbouncer`).";

const live = new ExitBackstop();

/** `{ uid, gid }` of `postgres` when this process is root, else undefined. */
function runAs() {
  if (typeof process.getuid !== "function" || process.getuid() !== 0) return undefined;
  const id = (flag) => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim());
  return { uid: id("-u"), gid: id("-g") };
}

/** One PgBouncer on a free 127.0.0.1 port in front of `upstream` (a PostgresServer). */
export class PgBouncerServer {
  #server = new ServerProcess("pgbouncer");

  constructor(port, upstream, options) {
    this.port = port;
    this.upstream = upstream;
    this.poolMode = options.poolMode;
    this.poolSize = options.poolSize ?? 2;
    this.dir = mkdtempSync(join(tmpdir(), "globallock-pgbouncer-"));
    live.add(this);
  }

  /** Starts a pooler in `options.poolMode` with `options.poolSize` server connections (default 2). */
  static async start(upstream, options) {
    const binary = findBinary("pgbouncer", ["/usr/sbin"], INSTALL_HINT);
    return startWithRetries(
      async () => new PgBouncerServer(await freePort(5432, 6432), upstream, options),
      (server) => server.#spawn(binary),
    );
  }

  /** Connection settings for `pg.Client` and `pg.Pool` through the pooler. */
  get connection() {
    return { host: HOST, port: this.port, user: "postgres", database: "postgres" };
  }

  /** The last few KB of the pooler's output. */
  log() {
    return this.#server.log();
  }

  /** A new `pg.Pool` through the pooler (errors of idle clients swallowed). The caller ends it. */
  pool(options = {}) {
    return poolOf(this.connection, options);
  }

  /** Stops the pooler (SIGKILL) and removes its directory. Never rejects. */
  stop() {
    return stopAndRemove(this.#server, this.dir, live, this);
  }

  /** Synchronous kill, for exit handlers. */
  killSync() {
    killAndRemoveSync(this.#server, this.dir, live, this);
  }

  #spawn(binary) {
    const ini = join(this.dir, "pgbouncer.ini");
    const users = join(this.dir, "users.txt");
    writeFileSync(users, '"postgres" ""\n');
    writeFileSync(
      ini,
      [
        "[databases]",
        `postgres = host=${HOST} port=${this.upstream.port} dbname=postgres user=postgres`,
        "[pgbouncer]",
        `listen_addr = ${HOST}`,
        `listen_port = ${this.port}`,
        "unix_socket_dir =",
        "auth_type = trust",
        `auth_file = ${users}`,
        `pool_mode = ${this.poolMode}`,
        `default_pool_size = ${this.poolSize}`,
        "max_client_conn = 200",
        "ignore_startup_parameters = extra_float_digits,options,statement_timeout,idle_in_transaction_session_timeout",
        "",
      ].join("\n"),
    );
    const user = runAs();
    if (user !== undefined) for (const path of [this.dir, ini, users]) chownSync(path, user.uid, user.gid);
    return this.#server.start(binary, [ini], user === undefined ? {} : { uid: user.uid, gid: user.gid }, {
      where: `${HOST}:${this.port}`,
      timeoutMs: 20_000,
      ready: () => this.#ready(),
    });
  }

  #ready() {
    return answersQueries(this.connection);
  }
}
