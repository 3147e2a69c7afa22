/**
 * Instructions per warm lock+release pair, counted by callgrind (valgrind), which load does not
 * change: `node bench/instructions.mjs [mode] [pairs]`, mode one of redis, redis-semaphore (limit 4,
 * weight 1), peer-semaphore (redis-semaphore's Semaphore, limit 4), peer-mutex (redis-semaphore's
 * Mutex), memory, file. Every mode runs sequential pairs on one key.
 *
 * It runs the same program twice under `valgrind --tool=callgrind` (main thread only, no
 * instrumentation of children): once with `pairs` measured pairs and once with twice as many, both
 * after the same warm-up, and reports (I(2n) − I(n)) / n — the instructions one more pair costs,
 * without start-up, warm-up or exit. Needs `npm run build` first (it loads dist/) and valgrind.
 * The Redis modes start their own redis-server on a free loopback port and also report Redis
 * commands per pair: `INFO commandstats` read by the parent before and after each run (commands
 * run inside scripts count as Redis counts them; housekeeping such as INFO and SCRIPT is left out),
 * as (C(2n) − C(n)) / n like the instructions.
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
const REDIS_MODES = new Set(["redis", "redis-semaphore", "peer-semaphore", "peer-mutex"]);
const SEMAPHORE_LIMIT = 4;

if (process.argv[4] === "--child") {
  await child(store, Number(process.argv[5]), process.argv[6]);
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
  }
  try {
    const counts = [];
    const commands = [];
    for (const n of [pairs, 2 * pairs]) {
      const before = await commandsOf();
      counts.push(await countInstructions(n, port));
      commands.push((await commandsOf()) - before);
    }
    const [small, large] = counts;
    const perPair = (large - small) / pairs;
    console.log(
      JSON.stringify({
        store,
        pairs,
        instructions: { [pairs]: small, [2 * pairs]: large },
        perPair: Math.round(perPair),
        ...(admin === undefined
          ? {}
          : { commandsPerPair: Math.round((100 * ((commands[1] ?? 0) - (commands[0] ?? 0))) / pairs) / 100 }),
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
    return Number(summary[1]);
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
    const make = () =>
      kind === "peer-mutex"
        ? new Mutex(client, "instructions")
        : new Semaphore(client, "instructions", SEMAPHORE_LIMIT);
    locker = {
      lock: async () => {
        const held = make();
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
  } else {
    throw new Error(`unknown mode ${kind}: redis, redis-semaphore, peer-semaphore, peer-mutex, memory or file`);
  }
  for (let i = 0; i < WARM_UP + n; i++) {
    const release = await locker.lock(undefined, "instructions");
    await release();
  }
  await locker.close();
  await cleanUp();
}
