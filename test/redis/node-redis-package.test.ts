/**
 * The published declarations without one of the two client libraries: both `ioredis` and `redis`
 * are optional peers, so a consumer with only one of them installed must type-check with
 * `skipLibCheck: false` (dist/ is built by `npm test` before vitest runs).
 */
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { typeCheckConsumer } from "../helpers/consumer.js";

const root = resolve(import.meta.dirname, "../..");

describe("package: optional client libraries", () => {
  it("declares ioredis and redis as optional peer dependencies", () => {
    const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
    expect(pkg.peerDependencies).toMatchObject({ ioredis: expect.any(String), redis: "^5.0.0 || ^6.0.0" });
    expect(pkg.peerDependenciesMeta).toMatchObject({ ioredis: { optional: true }, redis: { optional: true } });
    expect(pkg.dependencies ?? {}).not.toHaveProperty("redis");
  });

  // tsc with skipLibCheck false reads every declaration node-redis ships: seconds of CPU, more under load.
  it("type-checks and loads a node-redis consumer that has no ioredis installed", { timeout: 120_000 }, async () => {
    await typeCheckConsumer(
      `
import { type Locker, RedisLocker, RedisReadWriteLocker, RedisSemaphore, type RedisClient } from "globallock";
import { createClient, createCluster } from "redis";
async function main(): Promise<void> {
  const client = await createClient({ url: "redis://127.0.0.1:1" }).connect();
  const cluster: RedisClient = createCluster({ rootNodes: [] });
  const locker: Locker = new RedisLocker(client, { expiry: 1000 });
  const semaphore: Locker = new RedisSemaphore(cluster, { limit: 2 });
  const rw = new RedisReadWriteLocker([client]);
  await Promise.all([locker.close(), semaphore.close(), rw.close()]);
}
void main;
`,
      ["ioredis"],
    );
  });
});
