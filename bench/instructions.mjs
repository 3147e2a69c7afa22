/**
 * Instructions per warm lock+release pair, counted by callgrind (valgrind), which load does not
 * change: `node bench/instructions.mjs [redis|memory|file|postgres|postgres-raw|postgres-raw-prepared] [pairs]`.
 *
 * It runs the same program twice under `valgrind --tool=callgrind` (main thread only, no
 * instrumentation of children): once with `pairs` measured pairs and once with twice as many, both
 * after the same warm-up, and reports (I(2n) − I(n)) / n — the instructions one more pair costs,
 * without start-up, warm-up or exit. Needs `npm run build` first (it loads dist/) and valgrind.
 * The Redis case starts its own redis-server on a free loopback port; the PostgreSQL cases start
 * their own PostgreSQL (support/postgres-server.mjs: a fresh cluster in a temp dir, a free loopback
 * port). `postgres-raw` is the floor: a `pg_try_advisory_lock($1)` / `pg_advisory_unlock($1)` pair
 * on one `pg` client (`postgres-raw-prepared`: the same as named prepared statements). For PostgreSQL it also reports the statements sent per measured pair (counted
 * in the child by a wrapper around `pg.Client.prototype.query`).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const WARM_UP = 3_000;
const here = fileURLToPath(new URL(".", import.meta.url));
const [store = "redis", pairsArgument = "4000"] = process.argv.slice(2);
const pairs = Number(pairsArgument);
/** Statements sent by the child (PostgreSQL cases only). */
let statements = 0;

if (process.argv[4] === "--child") {
  await child(store, Number(process.argv[5]), process.argv[6]);
} else {
  await parent();
}

async function parent() {
  execFileSync("valgrind", ["--version"], { stdio: "ignore" });
  let server;
  let port = "";
  if (store === "redis") {
    const { startServer } = await import("./lib/redis-server.mjs");
    server = await startServer();
    port = String(server.port);
  } else if (store.startsWith("postgres")) {
    const { PostgresServer } = await import("../support/postgres-server.mjs");
    server = await PostgresServer.start();
    port = String(server.port);
  }
  try {
    const counts = [];
    let statements;
    for (const n of [pairs, 2 * pairs]) {
      const counted = await countInstructions(n, port);
      counts.push(counted.instructions);
      statements ??= counted.statements;
    }
    const [small, large] = counts;
    const perPair = (large - small) / pairs;
    console.log(
      JSON.stringify({
        store,
        pairs,
        instructions: { [pairs]: small, [2 * pairs]: large },
        perPair: Math.round(perPair),
        ...(statements === undefined ? {} : { statementsPerPair: statements }),
      }),
    );
  } finally {
    await server?.stop();
  }
}

async function countInstructions(n, port) {
  const dir = mkdtempSync(join(tmpdir(), "globallock-callgrind-"));
  try {
    const out = join(dir, "callgrind.out");
    const run = spawnSync(
      "valgrind",
      [
        "--tool=callgrind",
        `--callgrind-out-file=${out}`,
        "--dump-instr=no",
        process.execPath,
        "--single-threaded",
        fileURLToPath(import.meta.url),
        store,
        String(pairs),
        "--child",
        String(n),
        port,
      ],
      { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 },
    );
    if (run.status !== 0) throw new Error(`valgrind failed: ${run.stderr.slice(-2000)}`);
    const summary =
      readFileSync(out, "utf8").match(/^summary: (\d+)/m) ?? readFileSync(out, "utf8").match(/^totals: (\d+)/m);
    if (summary === null) throw new Error("no summary in callgrind output");
    const statements = /^statements per pair: ([\d.]+)$/m.exec(run.stdout)?.[1];
    return { instructions: Number(summary[1]), statements: statements === undefined ? undefined : Number(statements) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function child(kind, n, port) {
  const lib = await import(join(here, "..", "dist", "esm", "index.js"));
  let locker;
  let cleanUp = async () => {};
  if (kind === "redis") {
    const { Redis } = await import("ioredis");
    const client = new Redis({ host: "127.0.0.1", port: Number(port) });
    locker = new lib.RedisLocker(client);
    cleanUp = async () => client.disconnect();
  } else if (kind === "memory") {
    locker = new lib.MemoryLocker();
  } else if (kind === "file") {
    const directory = mkdtempSync(join(tmpdir(), "globallock-callgrind-files-"));
    locker = new lib.FileLocker({ directory });
    cleanUp = async () => rmSync(directory, { recursive: true, force: true });
  } else if (kind.startsWith("postgres")) {
    const { default: pg } = await import("pg");
    const connection = { host: "127.0.0.1", port: Number(port), user: "postgres", database: "postgres" };
    // Statements sent, counted in JS (every query of the locker or the floor goes through here).
    const query = pg.Client.prototype.query;
    pg.Client.prototype.query = function countedQuery(...args) {
      statements++;
      return query.apply(this, args);
    };
    if (kind === "postgres") {
      const pool = new pg.Pool({ ...connection, max: 2 });
      locker = new lib.PostgresLocker(pool);
      cleanUp = async () => pool.end();
    } else {
      const client = new pg.Client(connection);
      await client.connect();
      locker = rawFloor(client, kind === "postgres-raw-prepared");
      cleanUp = async () => client.end();
    }
  } else {
    throw new Error(`unknown store ${kind}: redis, memory, file, postgres, postgres-raw or postgres-raw-prepared`);
  }
  let counted = 0;
  for (let i = 0; i < WARM_UP + n; i++) {
    if (i === WARM_UP) counted = statements;
    const release = await locker.lock(undefined, "instructions");
    await release();
  }
  if (kind.startsWith("postgres")) console.log(`statements per pair: ${(statements - counted) / n}`);
  await locker.close();
  await cleanUp();
}

/**
 * The PostgreSQL floor: a raw `pg_try_advisory_lock($1)` / `pg_advisory_unlock($1)` pair on one
 * `pg` client, shaped like a locker for the loop above (the key's id is a constant); with
 * `prepared`, both as named prepared statements (parsed once per connection).
 */
function rawFloor(client, prepared) {
  const values = ["1234567890123"];
  const lock = { text: "SELECT pg_try_advisory_lock($1::bigint) AS ok", values };
  const unlock = { text: "SELECT pg_advisory_unlock($1::bigint) AS ok", values };
  const statement = (config, name) => (prepared ? { ...config, name } : config);
  const release = async () => {
    await client.query(statement(unlock, "floor_unlock"));
  };
  return {
    async lock() {
      const { rows } = await client.query(statement(lock, "floor_lock"));
      if (rows[0]?.ok !== true) throw new Error("the floor's key was taken");
      return release;
    },
    async close() {},
  };
}
