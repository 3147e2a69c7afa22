/** The README's first command runs examples/counter.mjs; make sure it works in both modes. */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisServer } from "./helpers/redis.js";

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
