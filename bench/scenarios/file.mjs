/**
 * Scenario 11: globallock's FileLocker against proper-lockfile, in the same run, on one lock
 * directory under the OS temporary directory (no server).
 *
 * - Uncontended: sequential lock + release on one key, a timed loop per contender per round
 *   (rounds interleave the contenders): ops/s (median over rounds), p50/p99 of one lock + release
 *   (pooled), and FileLocker's ops/s ÷ proper-lockfile's (median of per-round ratios), by default
 *   and with `syncCalls: false`; in the OS temporary directory and again in /dev/shm (tmpfs).
 * - Hand-off: A holds the key, B is blocked in lock(), A releases 3–12 ms later at t0 (just before
 *   calling release), B's lock resolves at t1; latency t1 − t0 (scenario 4's `localRep` and
 *   `remoteRep`), with B in this process (another locker) and in another process
 *   (bench/file-worker.mjs, timed on the shared epoch clock). FileLocker's B wakes on the release
 *   through fs.watch; proper-lockfile cannot wait for a release, so its B polls (every 1 ms and
 *   every 25 ms).
 * - Contended (bench/lib/store-contention.mjs): 8 workers on one key in the OS temporary
 *   directory, each with its own FileLocker, beside proper-lockfile polling every 1 ms.
 *
 * Run it alone: `BENCH_ONLY=file BENCH_QUICK=1 node bench/run.mjs` (after npm run build).
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { statfs } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { QUICK } from "../lib/config.mjs";
import { FILE_CONTENDERS } from "../lib/file-contenders.mjs";
import { int, num, table } from "../lib/format.mjs";
import { WorkerProcess } from "../lib/rpc.mjs";
import { median, percentile } from "../lib/stats.mjs";
import { measureStoreContention, renderStoreContention, withShareOfLimit } from "../lib/store-contention.mjs";
import { now } from "../lib/timing.mjs";
import { clockOffset, localRep, remoteRep } from "./handoff.mjs";

/** A tmpfs every Linux host has: the uncontended loop runs there too. */
const SHM = "/dev/shm";
/** Names of a few Linux statfs magic numbers (statfs(2)). */
const FILE_SYSTEM_NAMES = new Map([
  [0xef53, "ext4"],
  [0x01021994, "tmpfs"],
  [0x58465342, "XFS"],
  [0x9123683e, "Btrfs"],
  [0x794c7630, "overlayfs"],
]);

const WORKER_MODULE = fileURLToPath(new URL("../file-worker.mjs", import.meta.url));

const CONFIG = QUICK
  ? { rounds: 2, durationMs: 300, maxOps: 20_000, handoffReps: 20, handoffSlowReps: 10 }
  : { rounds: 5, durationMs: 1000, maxOps: 200_000, handoffReps: 100, handoffSlowReps: 40 };

const UNCONTENDED = [
  FILE_CONTENDERS.globallock,
  FILE_CONTENDERS["globallock-pool"],
  FILE_CONTENDERS["raw-rename"],
  FILE_CONTENDERS["proper-lockfile"],
];
const HANDOFF = [
  { contender: FILE_CONTENDERS.globallock },
  { contender: FILE_CONTENDERS["proper-lockfile-1ms"] },
  { contender: FILE_CONTENDERS["proper-lockfile-25ms"], slow: true },
].flatMap(({ contender, slow }) => [
  { id: `${contender.id}:local`, label: `${contender.label} — B in same process`, contender, slow },
  { id: `${contender.id}:remote`, label: `${contender.label} — B in other process`, contender, slow, remote: true },
]);

/** Sequential lock + release on one key for `durationMs`: ops/s and per-op latencies (ms). */
async function uncontendedLoop(session, key, durationMs, maxOps) {
  const samples = [];
  const start = now();
  const end = start + durationMs;
  while (samples.length < maxOps && now() < end) {
    const t = now();
    const release = await session.lock(key);
    await release();
    samples.push(now() - t);
  }
  return { opsPerSec: (samples.length * 1000) / (now() - start), samples };
}

/**
 * Runs scenario 11.
 * @param {{ log: (line: string) => void }} context
 */
export async function runFile({ log }) {
  const directory = mkdtempSync(join(tmpdir(), "globallock-bench-file-"));
  const worker = new WorkerProcess(WORKER_MODULE);
  const sessions = [];
  const open = (contender) => {
    const session = contender.open(directory);
    sessions.push(session);
    return session;
  };
  const places = [
    { id: "tmpdir", directory, label: `the OS temporary directory (${await fileSystemName(directory)})` },
  ];
  if (existsSync(SHM)) {
    const shm = mkdtempSync(join(SHM, "globallock-bench-file-"));
    places.push({ id: "shm", directory: shm, label: `${SHM} (${await fileSystemName(shm)})` });
  }
  try {
    // Uncontended, interleaved rounds, in each place.
    const uncontended = [];
    for (const place of places) {
      const opened = new Map(
        UNCONTENDED.map((c) => {
          const session = c.open(place.directory);
          sessions.push(session);
          return [c.id, { session, rates: [], samples: [] }];
        }),
      );
      const ratios = [];
      const poolRatios = [];
      const floorRatios = [];
      const poolFloorRatios = [];
      for (let round = 0; round < CONFIG.rounds; round++) {
        const rates = {};
        for (const contender of UNCONTENDED) {
          const s = opened.get(contender.id);
          const result = await uncontendedLoop(
            s.session,
            `uncontended-${contender.id}`,
            CONFIG.durationMs,
            CONFIG.maxOps,
          );
          s.rates.push(result.opsPerSec);
          s.samples.push(...result.samples);
          rates[contender.id] = result.opsPerSec;
        }
        ratios.push(rates.globallock / rates["proper-lockfile"]);
        poolRatios.push(rates["globallock-pool"] / rates["proper-lockfile"]);
        floorRatios.push(rates["raw-rename"] / rates["proper-lockfile"]);
        poolFloorRatios.push(rates["globallock-pool"] / rates["raw-rename"]);
        log(`file: uncontended in ${place.id}, round ${round + 1}/${CONFIG.rounds} done`);
      }
      uncontended.push({
        place: place.label,
        rows: UNCONTENDED.map((c) => {
          const s = opened.get(c.id);
          return {
            id: c.id,
            label: c.label,
            opsPerSec: median(s.rates),
            p50Ms: median(s.samples),
            p99Ms: percentile(s.samples, 99),
            rates: s.rates,
          };
        }),
        globallockOverProperLockfile: median(ratios),
        poolOverProperLockfile: median(poolRatios),
        floorOverProperLockfile: median(floorRatios),
        poolOverFloor: median(poolFloorRatios),
      });
    }
    // Hand-off, interleaved rounds; B here or in the worker process.
    const state = new Map();
    for (const variant of HANDOFF) {
      if (variant.remote) {
        await worker.call("prepare", { sessionId: variant.id, contenderId: variant.contender.id, directory });
      }
      state.set(variant.id, {
        a: open(variant.contender),
        b: variant.remote ? undefined : open(variant.contender),
        target: variant.slow ? CONFIG.handoffSlowReps : CONFIG.handoffReps,
        samples: [],
      });
    }
    const clock = await clockOffset(worker);
    for (let round = 0; round < CONFIG.rounds; round++) {
      for (const variant of HANDOFF) {
        const s = state.get(variant.id);
        const quota = Math.ceil((s.target * (round + 1)) / CONFIG.rounds);
        const key = `handoff-${variant.id.replace(":", "-")}`;
        while (s.samples.length < quota) {
          s.samples.push(
            variant.remote ? await remoteRep(s.a, worker, variant.id, key) : await localRep(s.a, s.b, key),
          );
        }
      }
      log(`file: hand-off round ${round + 1}/${CONFIG.rounds} done`);
    }
    // Contended: 8 workers on one key in the OS temporary directory, each its own locker.
    const contenders = [FILE_CONTENDERS.globallock, FILE_CONTENDERS["proper-lockfile-1ms"]].map((c) => ({
      id: c.id,
      label: c.label,
      open: () => c.open(directory),
    }));
    const tPairMs = uncontended[0]?.rows.find((r) => r.id === "globallock")?.p50Ms ?? Number.NaN;
    const contended = withShareOfLimit(
      await measureStoreContention(contenders, "contended", (line) => log(`file: ${line}`)),
      tPairMs,
    );
    return {
      config: CONFIG,
      directory,
      contended,
      clockOffsetMs: clock.offset,
      uncontended,
      handoff: HANDOFF.map((variant) => {
        const samples = state.get(variant.id).samples;
        return {
          id: variant.id,
          label: variant.label,
          remote: variant.remote === true,
          reps: samples.length,
          p50Ms: median(samples),
          p99Ms: percentile(samples, 99),
          maxMs: Math.max(...samples),
          samples,
        };
      }),
    };
  } finally {
    for (const session of sessions) await session.close();
    await worker.call("closeAll").catch(() => undefined);
    await worker.close();
    for (const place of places) rmSync(place.directory, { recursive: true, force: true });
  }
}

/** The file system a directory is on, as `statfs` names it (Linux magic numbers; else its number). */
async function fileSystemName(directory) {
  const { type } = await statfs(directory);
  return FILE_SYSTEM_NAMES.get(type) ?? `file system 0x${type.toString(16)}`;
}

/** The report section of scenario 11. */
export function renderFile(s) {
  return [
    "## 11. Lock files on one host: FileLocker vs proper-lockfile",
    "",
    `A lock directory under the OS temporary directory (and one in ${SHM}, tmpfs, for the uncontended loop), no server. Uncontended: sequential lock + release on one key, ${s.config.rounds} interleaved rounds of ${s.config.durationMs} ms per contender; ops/s is the median over rounds, p50/p99 of one lock + release are pooled; "÷ proper-lockfile" is the median of the per-round ratios. FileLocker's default, \`syncCalls: "auto"\`, calls the file system on the event loop on tmpfs and through libuv's thread pool on a disk; \`syncCalls: false\` always through the thread pool. The raw floor makes the 4 calls of a FileLocker lock + release through the thread pool (mkdir of the entry, rename onto the lock, rename of the entry out, rmdir of the emptied lock not waited for) and nothing else: what any locker on those calls pays.`,
    "",
    table(
      ["where", "locker", "ops/s", "÷ proper-lockfile", "lock + release p50 (µs)", "p99 (µs)"],
      s.uncontended.flatMap((place) =>
        place.rows.map((r) => [
          place.place,
          r.label,
          int(r.opsPerSec),
          r.id === "globallock"
            ? `${num(place.globallockOverProperLockfile, 3)}×`
            : r.id === "globallock-pool"
              ? `${num(place.poolOverProperLockfile, 3)}× (${num(place.poolOverFloor, 3)}× the raw floor)`
              : r.id === "raw-rename"
                ? `${num(place.floorOverProperLockfile, 3)}×`
                : "",
          num(r.p50Ms * 1000),
          num(r.p99Ms * 1000),
        ]),
      ),
    ),
    "",
    `Hand-off: A holds the key, B is blocked in lock(), A releases 3–12 ms later; latency = B's lock resolving − A calling release (A's release included). FileLocker's B wakes on the release through fs.watch (a jittered backoff is only its safety net); proper-lockfile has no wait, so its B polls through its \`retries\` option. Cross-process clock offset ${num(s.clockOffsetMs * 1000)} µs.`,
    "",
    table(
      ["contender", "reps", "p50 (ms)", "p99 (ms)", "max (ms)"],
      s.handoff.map((r) => [r.label, int(r.reps), num(r.p50Ms), num(r.p99Ms), num(r.maxMs)]),
    ),
    ...(s.contended === undefined ? [] : ["", ...renderStoreContention(s.contended)]),
  ].join("\n");
}
