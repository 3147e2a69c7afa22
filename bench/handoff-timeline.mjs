/**
 * Where a Redis hand-off's time goes: `node bench/handoff-timeline.mjs [reps]` (default 600 per
 * round, 3 rounds). A holds the key, B (another locker of this process, on its own client) is
 * blocked in lock(); A releases at t0. Every repetition records, from t0: when A's release was
 * written to A's socket, when A's socket next had data (the release's reply), when the other
 * sockets next had data (B's subscriber: the grant), when A's release resolved and when B's lock
 * resolved. RedisLocker and the raw direct grant (bench/lib/raw-direct-grant.mjs) alternate round
 * by round on one redis-server of their own; medians per contender, and the time Redis spent per
 * script call (EVALSHA, `INFO commandstats`, every script of the contender's repetitions). Writes
 * and reads are seen through `net.Socket.prototype.write` and `emit("data")`, wrapped for this
 * probe only.
 *
 * Pin it to one CPU (`taskset -c 0`) to see both processes' work on one core, as in
 * `npm run bench`'s hand-off scenario, where B runs in another process on the same CPU.
 */
import net from "node:net";
import { RedisLocker } from "globallock";
import { rawDirectGrant } from "./lib/raw-direct-grant.mjs";
import { connectClient } from "./lib/redis-client.mjs";
import { startServer } from "./lib/redis-server.mjs";
import { median } from "./lib/stats.mjs";
import { now, sleep } from "./lib/timing.mjs";

const REPS = Number(process.argv[2] ?? 600);
const ROUNDS = 3;
const WARM_UP = 50;

/** The probe's marks for the repetition under way (undefined: not recording). */
let marks;
const write = net.Socket.prototype.write;
net.Socket.prototype.write = function recordedWrite(...args) {
  if (marks !== undefined && marks.written === undefined) {
    marks.written = now();
    marks.writer = this;
  }
  return write.apply(this, args);
};
const emit = net.Socket.prototype.emit;
net.Socket.prototype.emit = function recordedEmit(event, ...args) {
  if (marks !== undefined && event === "data") {
    const at = now();
    if (this === marks.writer) marks.replyRead ??= at;
    else marks.otherRead ??= at;
  }
  return emit.call(this, event, ...args);
};

const globallock = {
  label: "globallock RedisLocker",
  async open(port) {
    const client = await connectClient(port);
    const locker = new RedisLocker(client);
    return {
      lock: (key) => locker.lock(undefined, key),
      async close() {
        await locker.close();
        client.disconnect();
      },
    };
  },
};
const floor = { label: "raw direct grant (floor)", open: (port) => rawDirectGrant.open(port) };

/** One hand-off from a to b on `key`: its marks, relative to t0. */
async function handOff(a, b, key) {
  const releaseA = await a.lock(key);
  let bResolved = 0;
  const blocked = b.lock(key).then((release) => {
    bResolved = now();
    return release;
  });
  await sleep(3 + Math.random() * 5);
  marks = {};
  const t0 = now();
  let aResolved = 0;
  await releaseA().then(() => {
    aResolved = now();
  });
  const releaseB = await blocked;
  const m = marks;
  marks = undefined;
  await releaseB();
  return {
    written: m.written - t0,
    replyRead: m.replyRead - t0,
    grantRead: m.otherRead - t0,
    aResolved: aResolved - t0,
    bResolved: bResolved - t0,
  };
}

/** EVALSHA calls and µs so far, from `INFO commandstats`. */
async function scriptTime(admin) {
  const line = /^cmdstat_evalsha:calls=(\d+),usec=(\d+)/m.exec(await admin.info("commandstats"));
  return { calls: Number(line?.[1] ?? 0), usec: Number(line?.[2] ?? 0) };
}

const server = await startServer();
const samples = new Map([globallock, floor].map((contender) => [contender, []]));
const scripts = new Map([globallock, floor].map((contender) => [contender, { calls: 0, usec: 0 }]));
const admin = await connectClient(server.port);
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const [contender, rows] of samples) {
      const a = await contender.open(server.port);
      const b = await contender.open(server.port);
      for (let i = 0; i < WARM_UP + REPS; i++) {
        if (i === WARM_UP) await admin.config("RESETSTAT");
        const row = await handOff(a, b, "bench:timeline");
        if (i >= WARM_UP) rows.push(row);
      }
      const spent = await scriptTime(admin);
      const total = scripts.get(contender);
      total.calls += spent.calls;
      total.usec += spent.usec;
      await a.close();
      await b.close();
    }
  }
} finally {
  admin.disconnect();
  await server.stop();
}
const fields = ["written", "replyRead", "grantRead", "aResolved", "bResolved"];
console.log(
  `| contender (ms from A calling release, medians of ${ROUNDS * REPS}) | ${fields.join(" | ")} | Redis µs per script call |`,
);
console.log(`| :--- | ${fields.map(() => "---:").join(" | ")} | ---: |`);
for (const [contender, rows] of samples) {
  const cells = fields.map((field) => median(rows.map((row) => row[field]).filter(Number.isFinite)).toFixed(3));
  const { calls, usec } = scripts.get(contender);
  console.log(`| ${contender.label} | ${cells.join(" | ")} | ${(usec / calls).toFixed(1)} |`);
}
