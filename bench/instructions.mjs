/**
 * Instructions per warm lock+release pair, counted by callgrind (valgrind), which load does not
 * change: `node bench/instructions.mjs [mode] [pairs] [keys]`, mode one of redis, redis-semaphore (limit 4,
 * weight 1), peer-semaphore (redis-semaphore's Semaphore, limit 4), peer-mutex (redis-semaphore's
 * Mutex), memory, file, postgres, postgres-raw, postgres-raw-prepared. Every mode runs sequential
 * pairs on one key; with `keys` > 1 (say 8), each round locks that many keys at once (one
 * `Promise.all`), then releases them at once, and `pairs` counts rounds (as does the warm-up, of
 * 3,000 pairs): the counts are reported per lock+release pair (per round divided by `keys`).
 *
 * It runs the same program twice under `valgrind --tool=callgrind` (main thread only, no
 * instrumentation of children): once with `pairs` measured pairs and once with twice as many, both
 * after the same warm-up, and reports (I(2n) − I(n)) / n — the instructions one more pair costs,
 * without start-up, warm-up or exit. Needs `npm run build` first (it loads dist/) and valgrind.
 * The Redis modes start their own redis-server on a free loopback port and also report Redis
 * commands per pair: `INFO commandstats` read by the parent before and after each run (commands
 * run inside scripts count as Redis counts them; housekeeping such as INFO and SCRIPT is left out),
 * as (C(2n) − C(n)) / n like the instructions. The PostgreSQL modes start their own PostgreSQL
 * (support/postgres-server.mjs: a fresh cluster in a temp dir, a free loopback port).
 * `postgres-raw` is the floor: a `pg_try_advisory_lock($1)` / `pg_advisory_unlock($1)` pair on one
 * `pg` client (`postgres-raw-prepared`: the same as named prepared statements). For PostgreSQL it
 * also reports the statements sent per measured pair (counted in the child by a wrapper around
 * `pg.Client.prototype.query`).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const WARM_UP = 3_000;
const here = fileURLToPath(new URL(".", import.meta.url));
const [store = "redis", pairsArgument = "4000", keysArgument = "1"] = process.argv.slice(2);
const pairs = Number(pairsArgument);
/** Keys locked at once per round (1: sequential pairs on one key). */
const keys = Number(keysArgument);
if (!Number.isInteger(keys) || keys < 1) throw new Error(`keys must be a positive integer; received ${keysArgument}`);
const REDIS_MODES = new Set(["redis", "redis-semaphore", "peer-semaphore", "peer-mutex"]);
const SEMAPHORE_LIMIT = 4;
/** Statements sent by the child (PostgreSQL cases only). */
let statements = 0;

if (process.argv[5] === "--child") {
  await child(store, Number(process.argv[6]), process.argv[7]);
} else {
  await parent();
}

async function parent() {
  execFileSync("valgrind", ["--version"], { stdio: "ignore" });
  let server;
  let port = "";
  let admin;
  let commandsOf = async () => 0;
  if (REDIS_MODES.has(store)) {
    const { startServer } = await import("./lib/redis-server.mjs");
    const { readCommandStats } = await import("./lib/command-stats.mjs");
    const { Redis } = await import("ioredis");
    server = await startServer();
    port = String(server.port);
    admin = new Redis({ host: "127.0.0.1", port: server.port });
    commandsOf = async () => Object.values(await readCommandStats(admin)).reduce((sum, calls) => sum + calls, 0);
  } else if (store.startsWith("postgres")) {
    const { PostgresServer } = await import("../support/postgres-server.mjs");
    server = await PostgresServer.start();
    port = String(server.port);
  }
  try {
    const counts = [];
    const commands = [];
    let statementsPerPair;
    for (const n of [pairs, 2 * pairs]) {
      const before = await commandsOf();
      const counted = await countInstructions(n, port);
      counts.push(counted.instructions);
      statementsPerPair ??= counted.statements;
      commands.push((await commandsOf()) - before);
    }
    const [small, large] = counts;
    const perPair = (large - small) / (pairs * keys);
    console.log(
      JSON.stringify({
        store,
        pairs,
        ...(keys === 1 ? {} : { keysAtOnce: keys }),
        instructions: { [pairs]: small, [2 * pairs]: large },
        perPair: Math.round(perPair),
        ...(admin === undefined
          ? {}
          : {
              commandsPerPair: Math.round((100 * ((commands[1] ?? 0) - (commands[0] ?? 0))) / (pairs * keys)) / 100,
            }),
        ...(statementsPerPair === undefined ? {} : { statementsPerPair }),
      }),
    );
  } finally {
    admin?.disconnect();
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
        String(keys),
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
  } else if (kind === "redis-semaphore") {
    const { Redis } = await import("ioredis");
    const client = new Redis({ host: "127.0.0.1", port: Number(port) });
    locker = new lib.RedisSemaphore(client, { limit: SEMAPHORE_LIMIT });
    cleanUp = async () => client.disconnect();
  } else if (kind === "peer-semaphore" || kind === "peer-mutex") {
    const { Redis } = await import("ioredis");
    const { Semaphore, Mutex } = await import("redis-semaphore");
    const client = new Redis({ host: "127.0.0.1", port: Number(port) });
    // One instance per acquisition, as redis-semaphore's README does (and bench/lib/redis-contenders.mjs).
    const make = (key) =>
      kind === "peer-mutex" ? new Mutex(client, key) : new Semaphore(client, key, SEMAPHORE_LIMIT);
    locker = {
      lock: async (_signal, key) => {
        const held = make(key);
        await held.acquire();
        return () => held.release();
      },
      close: async () => {},
    };
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
      if (keys !== 1) throw new Error("the raw PostgreSQL floor locks one key: no keys argument");
      locker = rawFloor(client, kind === "postgres-raw-prepared");
      cleanUp = async () => client.end();
    }
  } else {
    throw new Error(
      `unknown mode ${kind}: redis, redis-semaphore, peer-semaphore, peer-mutex, memory, file, postgres, postgres-raw or postgres-raw-prepared`,
    );
  }
  let counted = 0;
  const names = keys === 1 ? ["instructions"] : Array.from({ length: keys }, (_, index) => `instructions-${index}`);
  // The same number of warm-up pairs, whatever the keys per round.
  const warmUp = Math.ceil(WARM_UP / keys);
  for (let i = 0; i < warmUp + n; i++) {
    if (i === warmUp) counted = statements;
    if (keys === 1) {
      const release = await locker.lock(undefined, "instructions");
      await release();
    } else {
      const releases = await Promise.all(names.map((name) => locker.lock(undefined, name)));
      await Promise.all(releases.map((release) => release()));
    }
  }
  if (kind.startsWith("postgres")) console.log(`statements per pair: ${(statements - counted) / (n * keys)}`);
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
