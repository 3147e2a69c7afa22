/**
 * Instructions per warm lock+release pair, counted by callgrind (valgrind), which load does not
 * change: `node bench/instructions.mjs [mode] [pairs] [keys]`, mode one of redis, redis-noscripts
 * (RedisLocker with `scripts: false`: WATCH/MULTI/EXEC instead of Lua), redis-raw (the
 * floor: `SET NX PX` with a fresh token, then an EVALSHA compare-and-delete), redlock (redlock 5,
 * `retryCount: 0`), sesame-redlock (@sesamecare-oss/redlock, the same), redlock-universal (its
 * `createLock`, default settings, one lock object per key; counted only when installed, see
 * bench/lib/optional-peers.mjs), redis-semaphore (limit 4,
 * weight 1), peer-semaphore (redis-semaphore's Semaphore, limit 4), peer-mutex (redis-semaphore's
 * Mutex), memory, async-mutex (one async-mutex Mutex: the in-process peer of memory), file,
 * file-pool, file-raw, proper-lockfile, postgres, postgres-raw, postgres-raw-prepared, and the newer stores'
 * modes below (every mode's table:
 * bench/instructions-table.mjs, `npm run bench:instructions`). Every mode runs
 * sequential pairs on one key; with `keys` > 1 (say 8), each round locks that many keys at once
 * (one `Promise.all`), then releases them at once, and `pairs` counts rounds (as does the warm-up,
 * of 10,000 pairs; `INSTRUCTIONS_WARM_UP` sets it): the counts are reported per lock+release pair (per round divided by `keys`).
 *
 * `memory-handoff` counts hand-offs instead, for MemoryLocker and async-mutex in the same run: the
 * holder of the key lets one waiter queue (`lock` called, then one event-loop turn: the waiter is
 * waiting), releases, and the waiter's `lock` resolves; the waiter is the next holder. A third
 * program runs the same loop with no lock (the turn and the awaits only): its count is subtracted,
 * so `perHandOff` is what one queued `lock` call plus the release that hands it the key cost.
 *
 * It runs the program once (`INSTRUCTIONS_RUNS` times, reporting the least: see RUNS) under
 * `valgrind --tool=callgrind` (main thread only, no
 * instrumentation of children), with dump points right before the first measured pair and right
 * after the last (see bench/lib/callgrind.mjs), and reports I / n: the instructions of the `pairs`
 * measured pairs, after the warm-up, without start-up, warm-up or exit. Needs `npm run build` first
 * (it loads dist/) and valgrind. The Redis modes start their own redis-server on a free loopback
 * port and also report Redis commands per pair: `INFO commandstats`, read by the parent before and
 * after the run, over every pair of the run, warm-up included (commands run inside scripts count
 * as Redis counts them; housekeeping such as INFO and SCRIPT is left out; a run's few start-up
 * commands are all housekeeping). Not read by the child: a second ioredis client in the counted
 * process, idle as it is, made RedisSemaphore count 3.5% more (118.3k against 114.9k per pair),
 * its code seeing two clients where the program it measures has one. The PostgreSQL modes start
 * their own PostgreSQL (support/postgres-server.mjs: a fresh cluster in a temp dir, a free
 * loopback port).
 * `postgres-raw` is the floor: a `pg_try_advisory_lock($1)` / `pg_advisory_unlock($1)` pair on one
 * `pg` client (`postgres-raw-prepared`: the same as named prepared statements). For PostgreSQL it
 * also reports the statements sent per measured pair (counted in the child by a wrapper around
 * `pg.Client.prototype.query`).
 *
 * The newer stores' modes — `postgres-table`, `mysql-table` (on MariaDB), `sqlite`, `zookeeper`,
 * `memcached`, each with its floor `<mode>-raw`: the locker's own statements, requests or commands
 * sent by hand on the same kind of client (bench/lib/store-floors.mjs) — start their server as
 * bench/lib/store-modes.mjs says and also report the store operations sent per measured pair.
 *
 * The file modes — `file` (FileLocker with its default `syncCalls: "auto"`: calls on the event loop
 * on a file system in memory, through libuv's thread pool elsewhere, as on the ext4 `/tmp` the
 * bench uses), `file-pool` (`syncCalls: false`: every call through the thread pool),
 * `proper-lockfile` (its `lock(path, { realpath: false, retries: 0 })` and the release it returns,
 * the peer of scenario 11) and `file-raw` (the floor: FileLocker's four calls through the thread
 * pool and nothing else, scenario 11's `raw-rename` in bench/lib/file-contenders.mjs) — also report file-system
 * calls and all system calls per pair, counted by `strace -f -c` (every thread, libuv's pool
 * included) on two more runs without valgrind, as (S(2n) − S(n)) / n. File-system calls are those
 * of {@link FS_CALLS}: each is one trip through libuv's thread pool for an asynchronous call.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { markMeasured, measuredInstructions, runChildUnderCallgrind, WARM_UP } from "./lib/callgrind.mjs";
import { missingPeer } from "./lib/optional-peers.mjs";
import { COMPARE_AND_DELETE, LEASE_MS } from "./lib/raw-floor.mjs";
import { openStoreMode, STORE_MODES, startStoreServer } from "./lib/store-modes.mjs";

const here = fileURLToPath(new URL(".", import.meta.url));
const [store = "redis", pairsArgument = "20000", keysArgument = "1"] = process.argv.slice(2);
const pairs = Number(pairsArgument);
/** What `memory-handoff` counts, in one run: ours, the peer, and the loop with no lock (the floor). */
const HANDOFF_KINDS = ["memory-handoff", "async-mutex-handoff", "no-lock-handoff"];
/** Keys locked at once per round (1: sequential pairs on one key). */
const keys = Number(keysArgument);
if (!Number.isInteger(keys) || keys < 1) throw new Error(`keys must be a positive integer; received ${keysArgument}`);
const REDIS_MODES = new Set([
  "redis",
  "redis-noscripts",
  "redis-raw",
  "redis-semaphore",
  "peer-semaphore",
  "peer-mutex",
  "redlock",
  "sesame-redlock",
  "redlock-universal",
]);
const SEMAPHORE_LIMIT = 4;
const FILE_MODES = new Set(["file", "file-pool", "file-raw", "proper-lockfile"]);
/** The system calls counted as file-system operations (path calls; strace's names on Linux). */
const FS_CALLS = new Set([
  "mkdir",
  "mkdirat",
  "rename",
  "renameat",
  "renameat2",
  "rmdir",
  "unlink",
  "unlinkat",
  "stat",
  "lstat",
  "newfstatat",
  "statx",
  "getdents64",
  "open",
  "openat",
  "utimensat",
  "access",
  "faccessat",
  "faccessat2",
  "readlink",
  "readlinkat",
  "link",
  "linkat",
  "symlink",
  "symlinkat",
]);
/**
 * Runs of each count (`INSTRUCTIONS_RUNS`, default 1), of which the least is reported: a run's
 * measured part can catch a late compile or a deoptimisation, which only ever adds (seen: one
 * RedisSemaphore run in four counted 117.4k per pair where the other three counted 113.9k–114.3k).
 */
const RUNS = Math.max(1, Number(process.env.INSTRUCTIONS_RUNS ?? 1));

/** Store operations sent by the child (PostgreSQL modes and STORE_MODES): statements, requests, commands. */
let operations = 0;

if (process.argv[5] === "--child") {
  await child(store, Number(process.argv[6]), process.argv[7]);
} else {
  await parent();
}

async function parent() {
  // A peer that is not installed is skipped with a note, not counted: a line saying so.
  const missing = missingPeer(store);
  if (missing !== undefined) {
    process.stderr.write(`instructions: skipped ${store}: ${missing}\n`);
    console.log(JSON.stringify({ store, skipped: missing }));
    return;
  }
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
  } else if (STORE_MODES.has(store)) {
    server = await startStoreServer(store);
    port = server.port;
  } else if (store.startsWith("postgres")) {
    const { PostgresServer } = await import("../support/postgres-server.mjs");
    server = await PostgresServer.start();
    port = String(server.port);
  }
  try {
    if (store === "memory-handoff") {
      console.log(JSON.stringify(await countHandOffs()));
      return;
    }
    const commandsBefore = await commandsOf();
    const counted = await countInstructions(pairs, port);
    const commands = (await commandsOf()) - commandsBefore;
    // Every pair of the runs, warm-up included (rounds of `keys` pairs).
    const pairsRun = (Math.ceil(WARM_UP / keys) + pairs) * keys * RUNS;
    console.log(
      JSON.stringify({
        store,
        pairs,
        ...(keys === 1 ? {} : { keysAtOnce: keys }),
        instructions: counted.instructions,
        perPair: Math.round(counted.instructions / (pairs * keys)),
        ...(admin === undefined ? {} : { commandsPerPair: Math.round((100 * commands) / pairsRun) / 100 }),
        ...(counted.operations === undefined ? {} : { operationsPerPair: counted.operations }),
        ...(FILE_MODES.has(store) ? countSyscalls() : {}),
      }),
    );
  } finally {
    admin?.disconnect();
    await server?.stop();
  }
}

/**
 * `memory-handoff`: instructions per hand-off of MemoryLocker and of async-mutex, each less the
 * floor (the same loop with no lock), all counted in this run; and their ratio.
 */
async function countHandOffs() {
  const raw = {};
  for (const kind of HANDOFF_KINDS) raw[kind] = (await countInstructions(pairs, "", kind)).instructions / pairs;
  const floor = raw["no-lock-handoff"] ?? 0;
  const ours = Math.round((raw["memory-handoff"] ?? 0) - floor);
  const peer = Math.round((raw["async-mutex-handoff"] ?? 0) - floor);
  return {
    store,
    handOffs: pairs,
    perHandOff: { MemoryLocker: ours, "async-mutex": peer },
    ratio: Math.round((100 * ours) / peer) / 100,
    floorPerHandOff: Math.round(floor),
  };
}

async function countInstructions(n, port, kind = store) {
  let least;
  for (let run = 0; run < RUNS; run++) {
    const counted = await countOnce(n, port, kind);
    if (least === undefined || counted.instructions < least.instructions) least = counted;
  }
  return least;
}

/** One run of {@link countInstructions}. */
async function countOnce(n, port, kind) {
  const dir = mkdtempSync(join(tmpdir(), "globallock-callgrind-"));
  try {
    const out = join(dir, "callgrind.out");
    const run = runChildUnderCallgrind({ out, mode: kind, pairs, keys, n, port });
    const operations = /^operations per pair: ([\d.]+)$/m.exec(run.stdout)?.[1];
    return {
      instructions: measuredInstructions(out),
      operations: operations === undefined ? undefined : Number(operations),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * File-system calls and all system calls per pair (file modes): the child run under
 * `strace -f -c` with n and 2n pairs, (S(2n) − S(n)) / n; `{}` without strace.
 */
function countSyscalls() {
  if (spawnSync("strace", ["-V"]).status !== 0) return {};
  const totals = [pairs, 2 * pairs].map((n) => {
    const dir = mkdtempSync(join(tmpdir(), "globallock-strace-"));
    try {
      const out = join(dir, "strace.txt");
      const run = spawnSync(
        "strace",
        [
          "-f",
          "-c",
          "-o",
          out,
          process.execPath,
          fileURLToPath(import.meta.url),
          store,
          String(pairs),
          String(keys),
          "--child",
          String(n),
        ],
        { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 },
      );
      if (run.status !== 0) throw new Error(`strace failed: ${run.stderr.slice(-2000)}`);
      let fs = 0;
      let all = 0;
      // Rows: % time, seconds, usecs/call, calls, [errors,] syscall.
      for (const line of readFileSync(out, "utf8").split("\n")) {
        const fields = line.trim().split(/\s+/);
        const name = fields.at(-1);
        if (fields.length < 5 || !/^[a-z_0-9]+$/.test(name ?? "") || name === "total") continue;
        const calls = Number(fields[3]);
        if (!Number.isFinite(calls)) continue;
        all += calls;
        if (FS_CALLS.has(name)) fs += calls;
      }
      return { fs, all };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  const per = (field) => Math.round((100 * ((totals[1]?.[field] ?? 0) - (totals[0]?.[field] ?? 0))) / pairs) / 100;
  return { fsCallsPerPair: per("fs"), syscallsPerPair: per("all") };
}

async function child(kind, n, port) {
  const lib = await import(join(here, "..", "dist", "esm", "index.js"));
  if (HANDOFF_KINDS.includes(kind)) {
    await handOffChild(kind, n, lib);
    return;
  }
  let locker;
  let cleanUp = async () => {};
  if (kind === "redis" || kind === "redis-noscripts") {
    const { Redis } = await import("ioredis");
    const client = new Redis({ host: "127.0.0.1", port: Number(port) });
    locker = new lib.RedisLocker(client, kind === "redis" ? {} : { scripts: false });
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
  } else if (kind === "redis-raw") {
    const { Redis } = await import("ioredis");
    const { randomBytes } = await import("node:crypto");
    const client = new Redis({ host: "127.0.0.1", port: Number(port) });
    const sha = await client.script("LOAD", COMPARE_AND_DELETE);
    // The floor: SET NX PX with a fresh random token, then the compare-and-delete by EVALSHA.
    locker = {
      lock: async (_signal, key) => {
        const token = randomBytes(16).toString("hex");
        if ((await client.set(key, token, "NX", "PX", LEASE_MS)) !== "OK") throw new Error("the floor's key was taken");
        return () => client.evalsha(sha, 1, key, token);
      },
      close: async () => {},
    };
    cleanUp = async () => client.disconnect();
  } else if (kind === "redlock" || kind === "sesame-redlock") {
    const { Redis } = await import("ioredis");
    // redlock 5's default export is the class; the fork's module exports it by name.
    const Redlock =
      kind === "redlock" ? (await import("redlock")).default : (await import("@sesamecare-oss/redlock")).Redlock;
    const client = new Redis({ host: "127.0.0.1", port: Number(port) });
    // One attempt, as the wall-clock bench's uncontended redlock row (redlock-0).
    const redlock = new Redlock([client], { retryCount: 0 });
    locker = {
      lock: async (_signal, key) => {
        const held = await redlock.acquire([key], LEASE_MS);
        return () => held.release();
      },
      close: async () => {},
    };
    cleanUp = async () => client.disconnect();
  } else if (kind === "redlock-universal") {
    const { Redis } = await import("ioredis");
    const { createLock, IoredisAdapter } = await import("redlock-universal");
    const client = new Redis({ host: "127.0.0.1", port: Number(port) });
    const adapter = new IoredisAdapter(client);
    // One lock object per key, kept (its README's use), default settings.
    const locks = new Map();
    locker = {
      lock: async (_signal, key) => {
        let lock = locks.get(key);
        if (lock === undefined) {
          lock = createLock({ adapter, key, ttl: LEASE_MS });
          locks.set(key, lock);
        }
        const handle = await lock.acquire();
        return () => lock.release(handle);
      },
      close: async () => {},
    };
    cleanUp = async () => client.disconnect();
  } else if (kind === "memory") {
    locker = new lib.MemoryLocker();
  } else if (kind === "async-mutex") {
    const { Mutex } = await import("async-mutex");
    const mutex = new Mutex();
    locker = { lock: () => mutex.acquire(), close: async () => {} };
  } else if (kind === "file" || kind === "file-pool") {
    const directory = mkdtempSync(join(tmpdir(), "globallock-callgrind-files-"));
    locker = new lib.FileLocker(kind === "file" ? { directory } : { directory, syncCalls: false });
    cleanUp = async () => rmSync(directory, { recursive: true, force: true });
  } else if (kind === "file-raw") {
    const { FILE_CONTENDERS } = await import("./lib/file-contenders.mjs");
    const directory = mkdtempSync(join(tmpdir(), "globallock-callgrind-files-"));
    const floor = FILE_CONTENDERS["raw-rename"].open(directory);
    locker = { lock: (_signal, key) => floor.lock(key), close: async () => floor.close() };
    cleanUp = async () => rmSync(directory, { recursive: true, force: true });
  } else if (kind === "proper-lockfile") {
    const { default: lockfile } = await import("proper-lockfile");
    const directory = mkdtempSync(join(tmpdir(), "globallock-callgrind-files-"));
    // As bench/lib/file-contenders.mjs opens it: one attempt, no realpath.
    locker = {
      lock: (_signal, key) => lockfile.lock(join(directory, key), { realpath: false, retries: 0 }),
      close: async () => {},
    };
    cleanUp = async () => rmSync(directory, { recursive: true, force: true });
  } else if (STORE_MODES.has(kind)) {
    ({ locker, cleanUp } = await openStoreMode(kind, port, lib, () => operations++));
  } else if (kind.startsWith("postgres")) {
    const { default: pg } = await import("pg");
    const connection = { host: "127.0.0.1", port: Number(port), user: "postgres", database: "postgres" };
    // Statements sent, counted in JS (every query of the locker or the floor goes through here).
    const query = pg.Client.prototype.query;
    pg.Client.prototype.query = function countedQuery(...args) {
      operations++;
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
      `unknown mode ${kind}: redis, redis-noscripts, redis-raw, redlock, sesame-redlock, redlock-universal, redis-semaphore, peer-semaphore, peer-mutex, memory, memory-handoff, async-mutex, file, file-pool, file-raw, proper-lockfile, postgres, postgres-raw, postgres-raw-prepared or one of ${[...STORE_MODES].join(", ")}`,
    );
  }
  let counted = 0;
  const names = keys === 1 ? ["instructions"] : Array.from({ length: keys }, (_, index) => `instructions-${index}`);
  // The same number of warm-up pairs, whatever the keys per round.
  const warmUp = Math.ceil(WARM_UP / keys);
  for (let i = 0; i < warmUp + n; i++) {
    if (i === warmUp) {
      counted = operations;
      markMeasured();
    }
    if (keys === 1) {
      const release = await locker.lock(undefined, "instructions");
      await release();
    } else {
      const releases = await Promise.all(names.map((name) => locker.lock(undefined, name)));
      await Promise.all(releases.map((release) => release()));
    }
  }
  markMeasured();
  if (kind.startsWith("postgres") || STORE_MODES.has(kind)) {
    console.log(`operations per pair: ${(operations - counted) / (n * keys)}`);
  }
  await locker.close();
  await cleanUp();
}

/**
 * The hand-off loop of `memory-handoff` (see the top of this file) for one of HANDOFF_KINDS: the
 * holder lets the next caller queue, waits one event-loop turn, releases, and the caller's lock
 * resolves. `no-lock-handoff` runs the same awaits with nothing locked.
 */
async function handOffChild(kind, n, lib) {
  let lock;
  if (kind === "memory-handoff") {
    const locker = new lib.MemoryLocker();
    lock = () => locker.lock(undefined, "instructions");
  } else if (kind === "async-mutex-handoff") {
    const { Mutex } = await import("async-mutex");
    const mutex = new Mutex();
    lock = () => mutex.acquire();
  } else {
    const none = () => undefined;
    lock = () => Promise.resolve(none);
  }
  const turn = () => new Promise((resolve) => setImmediate(resolve));
  let release = await lock();
  for (let i = 0; i < WARM_UP + n; i++) {
    if (i === WARM_UP) markMeasured();
    const next = lock();
    await turn();
    await release();
    release = await next;
  }
  markMeasured();
  await release();
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
