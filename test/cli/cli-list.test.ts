/**
 * `globallock list [--prefix P] [--limit N] [--json] [store options]`: the held keys of a real
 * Redis and of the file store (held by lockers of the test's process and by a run of the CLI, then
 * SIGKILLed) as a table that fits 80 columns (a long key cut with …), or one JSON object. Parsing
 * is checked without starting anything.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseCommandLine } from "../../src/cli/args.js";
import { listTable, shortMs } from "../../src/cli/list.js";
import { HELP, USAGE, UsageError } from "../../src/cli/usage.js";
import { FileReadWriteLocker, type Lease, type ReadWriteLocker, RedisReadWriteLocker } from "../../src/index.js";
import { assertBuilt, runCli, startCli } from "../helpers/cli.js";
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
    const held = await holdAndList(redis, locker, locker);
    expect(held.label).toMatch(/^Redis /);
    await held.release();
    expect((await runCli(["list", ...redis, "--json"])).stdout).toBe(
      `${JSON.stringify({ store: held.label, locks: [], limitReached: false })}\n`,
    );
  }, 60_000);

  it("on the file store: every key the CLI's runs hold, from another process; a killed run's key is gone", async () => {
    const dir = ["--dir", directory];
    // The CLI's own store: a read-write locker on the directory, here in the test's process.
    const files = new FileReadWriteLocker({ directory, owner: "ci-runner-7" });
    const waiter = new FileReadWriteLocker({ directory });
    // A run of the CLI itself holds a key too, until it is killed (its command tells its pid, to
    // be killed here should the run's reaper miss it).
    const pidFile = join(directory, "doomed.pid");
    const run = startCli([
      "run",
      ...dir,
      "--owner",
      "doomed-run",
      "doomed",
      "-c",
      `echo $$ > ${pidFile}; exec sleep 600`,
    ]);
    await eventually(async () => (await files.write.inspect(undefined, "doomed")).holders.length === 1, 20_000);
    const held = await holdAndList(dir, files, waiter, { doomed: /^doomed\s+doomed-run\s+exclusive\s+\S+\s+0$/ });
    expect(held.label).toBe(`file store ${directory}`);

    // SIGKILLed (its command with it): its entry stays until someone takes the key over, but
    // names a dead process.
    run.child.kill("SIGKILL");
    await run.exited;
    try {
      const listed = async (): Promise<{ locks: unknown[] }> =>
        JSON.parse((await runCli(["list", ...dir, "--prefix", "doomed", "--json"])).stdout);
      await eventually(async () => (await listed()).locks.length === 0);
    } finally {
      const pid = Number(readFileSync(pidFile, "utf8"));
      try {
        if (pid > 0) process.kill(pid, "SIGKILL");
      } catch {
        // Gone with its run, as it should be.
      }
    }
    await held.release();
    expect((await runCli(["list", ...dir, "--json"])).stdout).toBe(
      `${JSON.stringify({ store: held.label, locks: [], limitReached: false })}\n`,
    );
    await Promise.all([files.close(), waiter.close()]);
  }, 60_000);
});

/**
 * Checks `globallock list <store>` on an empty store, then holds with `locker` (the CLI's own kind
 * of locker, its owner "ci-runner-7") a key, two readers of another and a long key, with a waiter
 * of `waiter` on the first, and checks the table, `--prefix`, `--limit` and `--json`, `more` (keys
 * held otherwise, each with its table line) among them. Resolves to the store's label and what
 * ends the waiter and releases the keys.
 */
async function holdAndList(
  store: readonly string[],
  locker: ReadWriteLocker,
  waiter: ReadWriteLocker,
  more: Record<string, RegExp> = {},
): Promise<{ label: string; release(): Promise<void> }> {
  const empty = await runCli(["list", ...store, "--prefix", "deploy/"]);
  expect(empty).toMatchObject({ code: 0, stdout: expect.stringMatching(/^no held locks under "deploy\/"/) });
  const longKey = `reports/${"quarterly-".repeat(8)}final`;
  const leases: Lease[] = [
    await locker.write.acquire(undefined, "deploy/api"),
    await locker.read.acquire(undefined, "catalog"),
    await locker.read.acquire(undefined, "catalog"),
    await locker.write.acquire(undefined, longKey),
  ];
  const stop = new AbortController();
  const waiting = waiter.write.acquire(stop.signal, "deploy/api").catch((error: unknown) => error);
  await eventually(async () => (await locker.write.inspect(undefined, "deploy/api")).waiting === 1, 20_000);

  const keys = ["catalog", "deploy/api", longKey, ...Object.keys(more)].sort();
  const all = await runCli(["list", ...store]);
  expect(all.code).toBe(0);
  const lines = all.stdout.trimEnd().split("\n");
  for (const line of lines) expect([...line].length).toBeLessThanOrEqual(80);
  expect(lines[0]).toMatch(/^KEY\s+HOLDER\s+MODE\s+LEFT\s+WAITING$/);
  expect(lines.slice(1).map((line) => line.split(/\s+/)[0])).toEqual(
    keys.map((key) => (key.length > 31 ? `${key.slice(0, 30)}…` : key)),
  );
  const lineOf = (key: string): string | undefined => lines[keys.indexOf(key) + 1];
  expect(lineOf("catalog")).toMatch(/^catalog\s+2 holders\s+shared\s+\d/);
  expect(lineOf("deploy/api")).toMatch(/^deploy\/api\s+ci-runner-7\s+exclusive\s+\S+\s+1$/);
  for (const [key, line] of Object.entries(more)) expect(lineOf(key)).toMatch(line);

  const narrowed = await runCli(["list", ...store, "--prefix", "deploy/"]);
  expect(narrowed.stdout.trimEnd().split("\n")).toHaveLength(2);
  const limited = await runCli(["list", ...store, "--limit", "1"]);
  expect(limited.stdout).toMatch(/\(the first 1 found; more may be held/);

  const json = await runCli(["list", ...store, "--json"]);
  expect(json.code).toBe(0);
  const parsed = JSON.parse(json.stdout) as { store: string; locks: Array<Record<string, unknown>> };
  expect(parsed.locks.map((lock) => lock.key)).toEqual(keys);
  expect(parsed.locks[keys.indexOf("deploy/api")]).toMatchObject({
    key: "deploy/api",
    held: true,
    waiting: 1,
    holders: [{ owner: "ci-runner-7", mode: "exclusive", weight: 1 }],
  });
  return {
    label: parsed.store,
    release: async () => {
      stop.abort(new Error("done"));
      await waiting;
      await Promise.all(leases.map((lease) => lease.release()));
    },
  };
}
