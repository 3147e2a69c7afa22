/**
 * `globallock list [--prefix P] [--limit N] [--json] [store options]`: the held keys of a real
 * Redis as a table that fits 80 columns (a long key cut with …), or one JSON object; the file
 * store refuses (exit 64, saying why). Parsing is checked without starting anything.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseCommandLine } from "../../src/cli/args.js";
import { listTable, shortMs } from "../../src/cli/list.js";
import { HELP, USAGE, UsageError } from "../../src/cli/usage.js";
import { type Lease, RedisReadWriteLocker } from "../../src/index.js";
import { assertBuilt, runCli } from "../helpers/cli.js";
import { RedisServer } from "../helpers/redis.js";
import { eventually } from "../helpers/wait.js";

const parse = (...argv: string[]) => parseCommandLine(argv, {});

describe("globallock list: the command line", () => {
  it("takes --prefix, --limit and --json with the store options", () => {
    expect(parse("list")).toEqual({
      command: "list",
      store: { kind: "file", directory: undefined },
      prefix: "",
      limit: undefined,
      json: false,
    });
    expect(parse("list", "--redis", "redis://h:1", "--prefix", "deploy/", "--limit", "20", "--json")).toEqual({
      command: "list",
      store: { kind: "redis", urls: ["redis://h:1"] },
      prefix: "deploy/",
      limit: 20,
      json: true,
    });
    expect(parse("list", "--help")).toEqual({ command: "help", topic: "list" });
    expect(USAGE).toMatch(/globallock list \[store options\] \[--prefix P\] \[--limit N\] \[--json\]/);
    expect(HELP).toMatch(/globallock list --redis/);
  });

  it("refuses a bad --limit, a key and stray arguments", () => {
    for (const limit of ["0", "10001", "-1", "1.5", "x", ""]) {
      expect(() => parse("list", `--limit=${limit}`)).toThrow(/--limit: expected a number from 1 to 10000/);
    }
    expect(() => parse("list", "--key", "k")).toThrow(UsageError);
    expect(() => parse("list", "deploy")).toThrow(/unexpected argument "deploy"/);
    expect(() => parse("list", "--wait", "1")).toThrow(UsageError);
  });

  it("lays the table out in at most 79 columns, cutting long keys and owners with …", () => {
    const table = listTable([
      {
        key: "k".repeat(200),
        holders: [{ owner: "o".repeat(300), mode: "exclusive", weight: 1, expiresInMs: 29_500 }],
        waiting: 1234567,
      },
      {
        key: "catalog",
        holders: [
          { owner: "a", mode: "shared", weight: 1, expiresInMs: 5_000 },
          { owner: "b", mode: "shared", weight: 1, expiresInMs: 4_000 },
        ],
        waiting: 0,
      },
      {
        key: "火".repeat(40),
        holders: [{ owner: "", mode: "exclusive", weight: 1, expiresInMs: Infinity }],
        waiting: 0,
      },
    ]);
    const lines = table.trimEnd().split("\n");
    expect(lines).toHaveLength(4);
    for (const line of lines) expect([...line].length).toBeLessThanOrEqual(79);
    expect(lines[0]).toMatch(/^KEY\s+HOLDER\s+MODE\s+LEFT\s+WAITING$/);
    expect(lines[1]).toMatch(/^k{30}… o{19}… exclusive 29\.5s\s+1234567$/);
    expect(lines[2]).toMatch(/^catalog\s+2 holders\s+shared\s+4\.0s\s+0$/);
    expect(lines[3]).toMatch(/^火{30}… \(unknown\)\s+exclusive ∞\s+0$/);
    expect([shortMs(850), shortMs(65_000), shortMs(3 * 3_600_000 + 60_000)]).toEqual(["850ms", "1m05s", "3h01m"]);
  });
});

describe("globallock list: against a real Redis and the file store", () => {
  let server: RedisServer;
  let client: Redis;
  let locker: RedisReadWriteLocker;
  let directory: string;
  beforeAll(async () => {
    assertBuilt();
    server = await RedisServer.start();
    client = new Redis({ host: server.host, port: server.port });
    // The CLI's own store: a read-write locker under its default prefix.
    locker = new RedisReadWriteLocker(client, { owner: "ci-runner-7" });
    directory = mkdtempSync(join(tmpdir(), "globallock-cli-list-"));
  });
  afterAll(async () => {
    await locker?.close();
    client?.disconnect();
    await server?.stop();
    if (directory !== undefined) rmSync(directory, { recursive: true, force: true });
  });

  it("prints every held key in 80 columns, --prefix and --limit narrow it, --json is one object", async () => {
    const redis = ["--redis", server.url];
    expect(await runCli(["list", ...redis])).toMatchObject({
      code: 0,
      stdout: expect.stringMatching(/^no held locks/),
    });
    const longKey = `reports/${"quarterly-".repeat(8)}final`;
    const leases: Lease[] = [
      await locker.write.acquire(undefined, "deploy/api"),
      await locker.read.acquire(undefined, "catalog"),
      await locker.read.acquire(undefined, "catalog"),
      await locker.write.acquire(undefined, longKey),
    ];
    const stop = new AbortController();
    const waiter = locker.write.acquire(stop.signal, "deploy/api").catch((error: unknown) => error);
    await eventually(async () => (await locker.write.inspect(undefined, "deploy/api")).waiting === 1, 20_000);

    const all = await runCli(["list", ...redis]);
    expect(all.code).toBe(0);
    const lines = all.stdout.trimEnd().split("\n");
    for (const line of lines) expect([...line].length).toBeLessThanOrEqual(80);
    expect(lines[0]).toMatch(/^KEY\s+HOLDER\s+MODE\s+LEFT\s+WAITING$/);
    expect(lines.slice(1).map((line) => line.split(/\s+/)[0])).toEqual([
      "catalog",
      "deploy/api",
      `${longKey.slice(0, 30)}…`,
    ]);
    expect(lines[1]).toMatch(/^catalog\s+2 holders\s+shared\s+\d/);
    expect(lines[2]).toMatch(/^deploy\/api\s+ci-runner-7\s+exclusive\s+\S+\s+1$/);

    const narrowed = await runCli(["list", ...redis, "--prefix", "deploy/"]);
    expect(narrowed.stdout.trimEnd().split("\n")).toHaveLength(2);
    const limited = await runCli(["list", ...redis, "--limit", "1"]);
    expect(limited.stdout).toMatch(/\(the first 1 found; more may be held/);

    const json = await runCli(["list", ...redis, "--json"]);
    expect(json.code).toBe(0);
    const parsed = JSON.parse(json.stdout) as { store: string; locks: Array<Record<string, unknown>> };
    expect(parsed.store).toMatch(/^Redis /);
    expect(parsed.locks.map((lock) => lock.key)).toEqual(["catalog", "deploy/api", longKey]);
    expect(parsed.locks[1]).toMatchObject({
      key: "deploy/api",
      held: true,
      waiting: 1,
      holders: [{ owner: "ci-runner-7", mode: "exclusive", weight: 1 }],
    });

    stop.abort(new Error("done"));
    await waiter;
    await Promise.all(leases.map((lease) => lease.release()));
    expect((await runCli(["list", ...redis, "--json"])).stdout).toBe(
      `${JSON.stringify({ store: parsed.store, locks: [], limitReached: false })}\n`,
    );
  }, 60_000);

  it("the file store cannot list its keys: exit 64 with the reason", async () => {
    const result = await runCli(["list", "--dir", directory]);
    expect(result.code).toBe(64);
    expect(result.stderr).toMatch(/lock files are named by a hash of the key/);
    expect(result.stdout).toBe("");
  });
});
