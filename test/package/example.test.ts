/** The README's first command runs examples/counter.mjs; the primitives' sections quote the other examples. Each must work in both modes. */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisServer } from "../helpers/redis.js";

const run = promisify(execFile);

describe("examples/counter.mjs (needs the build: npm test builds first)", () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await RedisServer.start();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("loses updates without the lock and keeps the count exact with it, in memory", async () => {
    const { stdout } = await run(process.execPath, ["examples/counter.mjs"]);
    expect(stdout).toMatch(/without a lock: +counter = \d+ \/ 200 \(\d+ updates lost\)/);
    expect(stdout).toMatch(/with the lock: +counter = 200 \/ 200 \(exact\)/);
  });

  it("does the same on Redis when REDIS_URL is set, and leaves no keys behind", async () => {
    const { stdout } = await run(process.execPath, ["examples/counter.mjs"], {
      env: { ...process.env, REDIS_URL: server.url },
    });
    expect(stdout).toMatch(/RedisLocker/);
    expect(stdout).toMatch(/with the lock: +counter = 200 \/ 200 \(exact\)/);
    const admin = server.client();
    try {
      expect(await admin.dbsize()).toBe(0);
    } finally {
      admin.disconnect();
    }
  });
});

describe("examples/thumbnails.mjs and examples/order-page.mjs (the README's semaphore and read-write examples)", () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await RedisServer.start();
  });
  afterAll(async () => {
    await server?.stop();
  });

  for (const mode of ["memory", "Redis"] as const) {
    it(`thumbnails never exceed 10 permits, 4K jobs counting 2 (${mode})`, async () => {
      const env = mode === "Redis" ? { ...process.env, REDIS_URL: server.url } : process.env;
      const { stdout } = await run(process.execPath, ["examples/thumbnails.mjs"], { env });
      const match = /(\w+Semaphore): 60 thumbnails, at most (\d+) \/ 10 permits in use/.exec(stdout);
      expect(match?.[1]).toBe(mode === "Redis" ? "RedisSemaphore" : "MemorySemaphore");
      expect(Number(match?.[2])).toBeGreaterThan(1);
      expect(Number(match?.[2])).toBeLessThanOrEqual(10);
    });

    it(`the order page has many readers at once and an update alone (${mode})`, async () => {
      const env = mode === "Redis" ? { ...process.env, REDIS_URL: server.url } : process.env;
      const { stdout } = await run(process.execPath, ["examples/order-page.mjs"], { env });
      expect(stdout).toMatch(mode === "Redis" ? /^RedisReadWriteLocker:/ : /^MemoryReadWriteLocker:/);
      expect(Number(/up to (\d+) readers at once/.exec(stdout)?.[1])).toBeGreaterThan(1);
      expect(stdout).toMatch(/update alone: true/);
      // Readers that came after the waiting update see the shipped order.
      expect(stdout).toMatch(/first page: order 42: paid \(v1\); last page: order 42: shipped \(v2\)/);
    });
  }

  it("leaves nothing in Redis but the fencing counter", async () => {
    const admin = server.client();
    try {
      expect((await admin.keys("*")).filter((key) => !key.endsWith(":fence"))).toEqual([]);
    } finally {
      admin.disconnect();
    }
  });
});

describe("examples/quick-start.mjs (the README's first example)", () => {
  it("takes and releases one lock on Redis and prints the result", async () => {
    const server = await RedisServer.start();
    try {
      const { stdout } = await run(process.execPath, ["examples/quick-start.mjs"], {
        env: { ...process.env, REDIS_URL: server.url },
      });
      expect(stdout).toMatch(/recomputed \{ id: 42, total: 99\.5 \}/);
      const admin = server.client();
      try {
        expect(await admin.dbsize()).toBe(0);
      } finally {
        admin.disconnect();
      }
    } finally {
      await server.stop();
    }
  });
});
