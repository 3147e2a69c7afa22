/**
 * `globallock run --limit N` in the BUILT command (npm test builds first): N + 1 real runs of one
 * key, at most N at once, on the file store and on a real redis-server (a free loopback port),
 * observed through the files the commands write (each counts the runs going when it starts), not
 * through timing; and the usage errors of a bad N, `--shared`, a quorum and `--fencing-env`.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseCommandLine } from "../../src/cli/args.js";
import { MAX_RUN_LIMIT } from "../../src/cli/option-values.js";
import { UsageError } from "../../src/cli/usage.js";
import { assertBuilt, type RunningCli, runCli, startCli } from "../helpers/cli.js";
import { tempLockDirectory } from "../helpers/file-harness.js";
import { type RedisServer, startServers, stopServers } from "../helpers/redis.js";
import { eventually } from "../helpers/wait.js";

let work: string;
let lockDirectory: string;

beforeAll(() => {
  assertBuilt();
  work = tempLockDirectory("cli-limit-work");
  lockDirectory = tempLockDirectory("cli-limit");
});
afterAll(() => {
  rmSync(work, { recursive: true, force: true });
  rmSync(lockDirectory, { recursive: true, force: true });
});

/**
 * The command of run `id`, in `dir`: marks itself running, records how many runs were marked
 * running then (itself included), waits for its go-ahead file, unmarks itself.
 */
function command(dir: string, id: string): string {
  const mark = join(dir, `running.${id}`);
  return (
    `touch '${mark}'; ls '${dir}' | grep -c '^running\\.' > '${join(dir, `seen.${id}`)}'; ` +
    `while [ ! -e '${join(dir, `go.${id}`)}' ]; do sleep 0.02; done; rm '${mark}'`
  );
}

/** The runs marked running in `dir`. */
const running = (dir: string): string[] =>
  readdirSync(dir)
    .filter((name) => name.startsWith("running."))
    .map((name) => name.slice("running.".length))
    .sort();

/**
 * Starts `limit + 1` runs of one key with `--limit limit` on `store`, and checks that `limit` run
 * while the last one waits (its command not started), that it starts once one of them ends, and
 * that no command ever saw more than `limit` running.
 */
async function limitHolds(store: readonly string[], key: string, limit: number): Promise<void> {
  const dir = join(work, key);
  mkdirSync(dir);
  const ids = Array.from({ length: limit + 1 }, (_, i) => `r${i}`);
  const runs = new Map<string, RunningCli>(
    ids.map((id) => [id, startCli(["run", ...store, "--limit", String(limit), "--json", key, "-c", command(dir, id)])]),
  );
  try {
    // `limit` commands run; the last run has said it waits, and its command has not started.
    await eventually(() => running(dir).length === limit, 15_000);
    const [waiter] = ids.filter((id) => !running(dir).includes(id)) as [string];
    await (runs.get(waiter) as RunningCli).waitFor(/"event":"waiting"/, "stderr", 15_000);
    expect(running(dir)).toHaveLength(limit);
    expect(existsSync(join(dir, `seen.${waiter}`))).toBe(false);
    // One ends: the waiting run gets its turn.
    const [first] = running(dir) as [string];
    writeFileSync(join(dir, `go.${first}`), "");
    await eventually(() => existsSync(join(dir, `seen.${waiter}`)), 15_000);
    for (const id of ids) writeFileSync(join(dir, `go.${id}`), "");
    const exits = await Promise.all([...runs.values()].map((run) => run.exited));
    expect(exits.map((exit) => exit.code)).toEqual(ids.map(() => 0));
    for (const id of ids) {
      const seen = Number(readFileSync(join(dir, `seen.${id}`), "utf8"));
      expect(seen, `run ${id} saw ${seen} running`).toBeLessThanOrEqual(limit);
    }
  } finally {
    for (const run of runs.values()) run.child.kill("SIGKILL");
  }
}

describe("globallock run --limit N", () => {
  it("file store: of three runs with --limit 2, two run at once and the third waits for one to end", async () => {
    await limitHolds(["--dir", lockDirectory], "files", 2);
  });

  describe("Redis", () => {
    let servers: RedisServer[] = [];
    beforeAll(async () => {
      servers = await startServers(1);
    });
    afterAll(async () => {
      await stopServers(servers);
    });

    it("one server: of three runs with --limit 2, two run at once and the third waits for one to end", async () => {
      await limitHolds(["--redis", (servers[0] as RedisServer).url], "redis", 2);
    });
  });

  it("--limit 1 with -n: a second run is refused with the conflict status while the first runs", async () => {
    const dir = join(work, "one");
    mkdirSync(dir);
    const first = startCli(["run", "--dir", lockDirectory, "--limit", "1", "one", "-c", command(dir, "a")]);
    try {
      await eventually(() => running(dir).length === 1, 15_000);
      const second = await runCli(["run", "--dir", lockDirectory, "--limit", "1", "-n", "--json", "one", "true"]);
      expect(second.code).toBe(75);
      expect(second.stderr).toMatch(/"event":"not-acquired".*"reason":"held"/);
      writeFileSync(join(dir, "go.a"), "");
      expect((await first.exited).code).toBe(0);
    } finally {
      first.child.kill("SIGKILL");
    }
  });

  it("a bad N, --shared, a Redlock quorum and --fencing-env above 1 are usage errors (exit 64) naming the problem", async () => {
    const run =
      (...args: string[]) =>
      () =>
        parseCommandLine(["run", ...args, "k", "true"], {});
    for (const bad of ["0", "-1", "1.5", "x", "", String(MAX_RUN_LIMIT + 1)]) {
      expect(run(`--limit=${bad}`)).toThrow(
        new UsageError(
          `--limit: expected a whole number of runs from 1 to ${MAX_RUN_LIMIT}, received ${JSON.stringify(bad)}`,
        ),
      );
    }
    expect(run("--limit", "2", "--shared")).toThrow(/either --limit or --shared/);
    const quorum = ["--redis", "redis://a", "--redis", "redis://b", "--redis", "redis://c"];
    expect(run("--limit", "2", ...quorum)).toThrow(/--limit needs the file store or one Redis server/);
    expect(run("--limit", "2", "--fencing-env", "TOKEN")).toThrow(/--fencing-env needs an exclusive lock/);
    expect(parseCommandLine(["run", "--limit", "1", "--fencing-env", "TOKEN", "k", "true"], {})).toMatchObject({
      limit: 1,
      fencingEnv: "TOKEN",
    });
    const refused = await runCli(["run", "--dir", lockDirectory, "--limit", "0", "k", "true"]);
    expect(refused.code).toBe(64);
    expect(refused.stderr).toMatch(/--limit: expected a whole number of runs from 1 to/);
  });
});
