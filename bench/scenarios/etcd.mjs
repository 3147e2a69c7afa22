/**
 * Scenario 12: EtcdLocker beside RedisLocker, in the same run.
 *
 * - Uncontended: sequential lock + release on one key; p50/p99 of one acquire + release and ops/s,
 *   for RedisLocker (default options, its own connection), EtcdLocker (default options, an
 *   `Etcd3` client of its own) and the raw floor of etcd: one put-if-absent transaction with a
 *   lease (compare the key's version to 0, put) and one delete, on a lease granted up front.
 * - Hand-off: A holds, B (another locker: its own client) waits in lock(); A releases at t0 (just
 *   before calling release), B's lock resolves at t1; latency t1 − t0. B in this process.
 * - Contended (bench/lib/store-contention.mjs): 8 workers on one key, each with its own
 *   EtcdLocker on its own client. etcd has no blocking lock call for a raw floor here (the etcd3
 *   client's lock does not wait), so the row stands against its ideal rate alone.
 *
 * It starts its own one-node etcd (support/etcd-server.mjs: a temp dir, free loopback ports) and
 * stops it at the end. Rounds interleave the contenders. etcd writes go through its WAL's fsync:
 * the numbers depend on the disk.
 */
import { EtcdLocker, RedisLocker } from "globallock";
import { Redis } from "ioredis";
import { EtcdCluster } from "../../support/etcd-server.mjs";
import { onCleanup } from "../lib/cleanup.mjs";
import { QUICK } from "../lib/config.mjs";
import { median, percentile } from "../lib/stats.mjs";
import { measureStoreContention, renderStoreContention, withShareOfLimit } from "../lib/store-contention.mjs";
import { handoff, sequential } from "../lib/store-loops.mjs";

const CONFIG = QUICK
  ? { rounds: 2, opsPerRound: 100, handoffReps: 20 }
  : { rounds: 5, opsPerRound: 400, handoffReps: 100 };

/** The contender of the contended rows, on `cluster`: each session its own client. */
function contendedContenders(cluster) {
  return [
    {
      id: "etcd",
      label: "EtcdLocker",
      open() {
        const client = cluster.client();
        const locker = new EtcdLocker(client);
        return {
          lock: (key) => locker.lock(undefined, key),
          close: async () => {
            await locker.close();
            client.close();
          },
        };
      },
    },
  ];
}

/** Runs the scenario; `context.port` is the benchmark's Redis. */
export async function runEtcd(context) {
  const log = context.log ?? (() => undefined);
  const cluster = await EtcdCluster.start();
  onCleanup(() => cluster.killSync());
  const clients = [cluster.client(), cluster.client(), cluster.client()];
  const redisClients = [
    new Redis({ port: context.port, host: "127.0.0.1" }),
    new Redis({ port: context.port, host: "127.0.0.1" }),
  ];
  try {
    const redisA = new RedisLocker(redisClients[0]);
    const redisB = new RedisLocker(redisClients[1]);
    const etcdA = new EtcdLocker(clients[0]);
    const etcdB = new EtcdLocker(clients[1]);
    const raw = clients[2];
    const lease = raw.lease(30, { autoKeepAlive: false });
    const leaseId = await lease.grant();
    const rawKey = Buffer.from("raw/k");
    const value = Buffer.from("token");
    const contenders = [
      { id: "redis", label: "RedisLocker", once: async () => (await redisA.lock(undefined, "k"))() },
      { id: "etcd", label: "EtcdLocker", once: async () => (await etcdA.lock(undefined, "k"))() },
      {
        id: "etcd-raw",
        label: "raw etcd: put-if-absent txn with a lease + delete",
        once: async () => {
          const put = await raw.kv.txn({
            compare: [{ key: rawKey, target: "Version", result: "Equal", version: 0 }],
            success: [{ request_put: { key: rawKey, value, lease: leaseId } }],
          });
          if (!put.succeeded) throw new Error("raw key held");
          await raw.kv.deleteRange({ key: rawKey });
        },
      },
    ];
    const samples = Object.fromEntries(contenders.map((c) => [c.id, { latency: [], opsPerSec: [] }]));
    for (const c of contenders) await sequential(c.once, 30); // warm-up
    for (let round = 0; round < CONFIG.rounds; round++) {
      for (const c of contenders) {
        if (c.id === "etcd-raw") await lease.keepaliveOnce();
        const result = await sequential(c.once, CONFIG.opsPerRound);
        samples[c.id].latency.push(...result.samples);
        samples[c.id].opsPerSec.push(result.opsPerSec);
      }
    }
    const handoffs = { redis: [], etcd: [] };
    for (let round = 0; round < CONFIG.rounds; round++) {
      handoffs.redis.push(...(await handoff(redisA, redisB, Math.ceil(CONFIG.handoffReps / CONFIG.rounds))));
      handoffs.etcd.push(...(await handoff(etcdA, etcdB, Math.ceil(CONFIG.handoffReps / CONFIG.rounds))));
    }
    await lease.revoke();
    await Promise.all([redisA.close(), redisB.close(), etcdA.close(), etcdB.close()]);
    const contended = withShareOfLimit(
      await measureStoreContention(contendedContenders(cluster), "contended", (line) => log(`etcd: ${line}`)),
      median(samples.etcd.latency),
    );
    const status = await raw.maintenance.status();
    return {
      etcdVersion: status.version,
      config: CONFIG,
      uncontended: contenders.map((c) => ({
        id: c.id,
        label: c.label,
        p50Us: median(samples[c.id].latency) * 1000,
        p99Us: percentile(samples[c.id].latency, 99) * 1000,
        opsPerSec: median(samples[c.id].opsPerSec),
      })),
      handoff: Object.entries(handoffs).map(([id, values]) => ({
        id,
        label: id === "redis" ? "RedisLocker" : "EtcdLocker",
        p50Us: median(values) * 1000,
        p99Us: percentile(values, 99) * 1000,
        reps: values.length,
      })),
      contended,
    };
  } finally {
    for (const client of redisClients) client.disconnect();
    for (const client of clients) client.close();
    await cluster.stop();
  }
}

const us = (value) => (value === undefined ? "–" : `${Math.round(value)} µs`);
const perSec = (value) => (value === undefined ? "–" : `${Math.round(value).toLocaleString("en-US")}`);

/** The scenario's Markdown section. */
export function renderEtcd(results) {
  const lines = [
    `## 12. etcd beside Redis (etcd ${results.etcdVersion}, one node)`,
    "",
    "| contender | acquire + release p50 | p99 | ops/s (sequential) |",
    "| --- | --- | --- | --- |",
    ...results.uncontended.map((r) => `| ${r.label} | ${us(r.p50Us)} | ${us(r.p99Us)} | ${perSec(r.opsPerSec)} |`),
    "",
    "| hand-off (B in same process, its own locker) | p50 | p99 | reps |",
    "| --- | --- | --- | --- |",
    ...results.handoff.map((r) => `| ${r.label} | ${us(r.p50Us)} | ${us(r.p99Us)} | ${r.reps} |`),
    ...(results.contended === undefined ? [] : ["", ...renderStoreContention(results.contended)]),
  ];
  return lines.join("\n");
}
