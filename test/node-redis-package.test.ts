/**
 * The published declarations without one of the two client libraries: both `ioredis` and `redis`
 * are optional peers, so a consumer with only one of them installed must type-check with
 * `skipLibCheck: false` (dist/ is built by `npm test` before vitest runs).
 */
import { execFile } from "node:child_process";
import {
  copyFileSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const root = resolve(import.meta.dirname, "..");

/**
 * Type-checks `source` (as an ES module and as CommonJS) in a directory that sees every installed
 * package except `missing` (and redlock, whose types never reach the declarations), plus a copy of
 * this package's package.json and dist/ as "globallock" (a copy, not a link: its declarations must
 * resolve their imports from the consumer's packages, not from this repository's); rejects with
 * the compiler's output. Then loads both builds there at run time.
 */
async function typeCheckConsumer(source: string, missing: readonly string[]): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "globallock-consumer-"));
  try {
    mkdirSync(join(dir, "node_modules"));
    for (const entry of readdirSync(join(root, "node_modules"))) {
      if (!entry.startsWith(".") && entry !== "redlock" && !missing.includes(entry)) {
        symlinkSync(join(root, "node_modules", entry), join(dir, "node_modules", entry));
      }
    }
    const installed = join(dir, "node_modules", "globallock");
    mkdirSync(installed);
    copyFileSync(join(root, "package.json"), join(installed, "package.json"));
    cpSync(join(root, "dist"), join(installed, "dist"), { recursive: true });
    writeFileSync(join(dir, "consumer.mts"), source);
    writeFileSync(join(dir, "consumer.cts"), source);
    const tsc = join(root, "node_modules/typescript/bin/tsc");
    const flags = [
      "--noEmit",
      "--strict",
      "--exactOptionalPropertyTypes",
      "--skipLibCheck",
      "false",
      "--types",
      "node",
    ];
    const resolution = ["--module", "nodenext", "--moduleResolution", "nodenext"];
    await run(process.execPath, [tsc, ...flags, ...resolution, "consumer.mts", "consumer.cts"], { cwd: dir }).catch(
      (error: { stdout: string }) => {
        throw new Error(error.stdout);
      },
    );
    // And both builds load without the missing packages (redlock, a dependency, is installed then).
    symlinkSync(join(root, "node_modules", "redlock"), join(dir, "node_modules", "redlock"));
    const load = `require("globallock").RedisLocker; import("globallock").then((m) => m.RedisLocker)`;
    await run(process.execPath, ["-e", load], { cwd: dir });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("package: optional client libraries", () => {
  it("declares ioredis and redis as optional peer dependencies", () => {
    const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
    expect(pkg.peerDependencies).toMatchObject({ ioredis: expect.any(String), redis: "^5.0.0 || ^6.0.0" });
    expect(pkg.peerDependenciesMeta).toMatchObject({ ioredis: { optional: true }, redis: { optional: true } });
    expect(pkg.dependencies).not.toHaveProperty("redis");
  });

  it("type-checks and loads a node-redis consumer that has no ioredis installed", async () => {
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

  it("type-checks and loads an ioredis consumer that has no redis installed", async () => {
    await typeCheckConsumer(
      `
import { type Locker, RedisLocker, type RedisClient } from "globallock";
import { Cluster, Redis } from "ioredis";
const clients: RedisClient[] = [new Redis({ lazyConnect: true }), new Cluster([])];
const locker: Locker = new RedisLocker(clients[0] as Redis);
void locker; void clients;
`,
      ["redis", "redis5", "@redis"],
    );
  });
});
