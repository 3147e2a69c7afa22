/**
 * redlock is an optional peer dependency: the BUILT package (npm test builds first), installed in a
 * consumer directory without redlock, loads and locks in memory and in files (ESM and CommonJS);
 * only a Redlock quorum (several Redis clients) needs it, and says so with a typed error naming
 * the package. Were any module of the file or memory path to import redlock, the child would fail
 * to load (ERR_MODULE_NOT_FOUND) before printing anything.
 */
import { execFile } from "node:child_process";
import { rmSync } from "node:fs";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { consumerDirectory } from "../helpers/consumer.js";

const run = promisify(execFile);

/** Locks in memory and in files, then tries a quorum of three (never connected) ioredis clients. */
const PROGRAM = (load: string): string => `
(async () => {
  const { FileLocker, MemoryLocker, RedisLocker } = ${load};
  const { tmpdir } = require("node:os");
  const { join } = require("node:path");
  const out = {};
  const memory = new MemoryLocker();
  await (await memory.acquire(undefined, "k")).release();
  await memory.close();
  const files = new FileLocker({ directory: join(tmpdir(), "globallock-optional-redlock-" + process.pid) });
  out.file = await (await files.acquire(undefined, "k")).releaseWithOutcome();
  await files.close();
  const { Redis } = require("ioredis");
  const clients = [1, 2, 3].map(() => new Redis({ lazyConnect: true, port: 1, retryStrategy: () => null }));
  const quorum = new RedisLocker(clients);
  try {
    await quorum.tryAcquire(undefined, "k");
    out.quorum = "acquired?";
  } catch (error) {
    out.quorum = { name: error.name, code: error.code, message: error.message, cause: error.cause?.code };
  }
  await quorum.close();
  for (const client of clients) client.disconnect();
  require("node:fs").rmSync(join(tmpdir(), "globallock-optional-redlock-" + process.pid), { recursive: true, force: true });
  console.log(JSON.stringify(out));
})();
`;

describe("redlock, an optional peer dependency", () => {
  let dir: string;
  beforeAll(() => {
    dir = consumerDirectory(["redlock"]);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it.each([
    ["CommonJS", `require("globallock")`, "MODULE_NOT_FOUND"],
    ["ESM", `await import("globallock")`, "ERR_MODULE_NOT_FOUND"],
  ])("%s: memory and file lockers work without it; a quorum names the missing package", async (_build, load, cause) => {
    const { stdout } = await run(process.execPath, ["-e", PROGRAM(load)], { cwd: dir, timeout: 30_000 });
    const out = JSON.parse(stdout) as Record<string, unknown>;
    expect(out.file).toBe("released");
    expect(out.quorum).toEqual({
      name: "StoreUnavailableError",
      code: "ERR_GLOBALLOCK_STORE_UNAVAILABLE",
      message:
        "A Redlock quorum (several Redis clients) needs the optional peer dependency redlock: npm install redlock@5.0.0-beta.2",
      cause,
    });
  });
});
