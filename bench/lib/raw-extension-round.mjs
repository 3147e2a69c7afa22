/**
 * The floor of an extension round: `count` keys, each holding a token, extended from a bare ioredis
 * client by the least a careful implementation does — per key, GET and compare with its token, then
 * PEXPIRE — in one Lua script per batch of `batch` keys (each key's token its own argument), with at
 * most `inFlight` calls in flight: the shape of RedisLocker's lease keeper (256 and 256), without
 * its bookkeeping. Most of the wall time is Redis running the scripts: the part of a round no
 * client can save.
 */
import { readRedisCpuMs } from "./command-stats.mjs";
import { connectClient } from "./redis-client.mjs";
import { now } from "./timing.mjs";

const EXTEND = `
local ttl, out = ARGV[1], {}
for i, key in ipairs(KEYS) do
  if redis.call("get", key) == ARGV[i + 1] then
    redis.call("pexpire", key, ttl)
    out[i] = "1"
  else
    out[i] = "0"
  end
end
return table.concat(out)
`;

/**
 * Fills `count` keys (not timed), runs `rounds` extension rounds of all of them and deletes them.
 * @param {number} port
 * @param {import("ioredis").Redis} monitor reads redis-server's CPU time
 * @returns {Promise<Array<{ wallMs: number, nodeCpuMs: number, redisCpuMs: number }>>} per round
 */
export async function rawExtensionRounds(port, monitor, { count, batch = 256, inFlight = 256, ttlMs, rounds }) {
  const client = await connectClient(port);
  const keys = Array.from({ length: count }, (_, i) => `bench:held-raw:${i}`);
  const tokens = keys.map((_, i) => `raw-${i.toString(36)}-${Math.random().toString(36).slice(2)}`);
  try {
    for (let from = 0; from < count; from += 1000) {
      const pipeline = client.pipeline();
      for (let i = from; i < Math.min(count, from + 1000); i++) pipeline.set(keys[i], tokens[i], "PX", ttlMs);
      await pipeline.exec();
    }
    const sha = await client.script("LOAD", EXTEND);
    const results = [];
    for (let round = 0; round < rounds; round++) {
      const redisBefore = await readRedisCpuMs(monitor);
      const cpuBefore = process.cpuUsage();
      const start = now();
      let next = 0;
      let extended = 0;
      const lane = async () => {
        while (next < count) {
          const from = next;
          next = Math.min(count, next + batch);
          const reply = await client.evalsha(
            sha,
            next - from,
            ...keys.slice(from, next),
            ttlMs,
            ...tokens.slice(from, next),
          );
          for (let i = 0; i < reply.length; i++) if (reply.charCodeAt(i) === 49) extended++;
        }
      };
      await Promise.all(Array.from({ length: inFlight }, lane));
      const wallMs = now() - start;
      const cpu = process.cpuUsage(cpuBefore);
      const redisCpuMs = (await readRedisCpuMs(monitor)) - redisBefore;
      if (extended !== count) throw new Error(`raw extension round: ${extended} of ${count} extended`);
      results.push({ wallMs, nodeCpuMs: (cpu.user + cpu.system) / 1000, redisCpuMs });
    }
    return results;
  } finally {
    for (let from = 0; from < count; from += 1000) await client.unlink(...keys.slice(from, from + 1000));
    client.disconnect();
  }
}
