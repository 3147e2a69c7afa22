/**
 * flock(1)'s habits in the BUILT `globallock` command (npm test builds first): `-n`, `-w`, `-E`,
 * `-s`, `-x`, `-c`, on the file store and on a real redis-server (a free loopback port); a lock
 * directory shared by two users (root and `nobody`, the second through `setpriv`); and the waiting
 * line fitted to a narrow terminal.
 */
import { spawn, spawnSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { dirname, join, relative } from "node:path";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FileReadWriteLocker, RedisReadWriteLocker } from "../../src/index.js";
import { assertBuilt, CLI, nodeCommand, runCli, startCli } from "../helpers/cli.js";
import { tempLockDirectory } from "../helpers/file-harness.js";
import { type RedisServer, startServers, stopServers } from "../helpers/redis.js";

/** A child that prints "ready" and runs until the file `marker` exists. */
const untilMarker = (marker: string): string[] =>
  nodeCommand(
    `console.log("ready"); const t = setInterval(() => {` +
      ` if (require("fs").existsSync(${JSON.stringify(marker)})) { clearInterval(t); console.log("finished"); } }, 20);`,
  );

/** What `run` exits with on `key` given `flags`, while the caller holds the key as it likes. */
const exitOf = async (store: string[], key: string, ...flags: string[]): Promise<number> =>
  (await runCli(["run", ...store, "--key", key, ...flags, "--", "true"])).code;

let directory: string;
let dirArgs: string[];
let files: FileReadWriteLocker;

beforeAll(() => {
  assertBuilt();
  directory = tempLockDirectory("cli-flock");
  dirArgs = ["--dir", directory];
  files = new FileReadWriteLocker({ directory });
});
afterAll(async () => {
  await files.close();
  rmSync(directory, { recursive: true, force: true });
});

describe("flock(1)'s options, file store", () => {
  it("-n, -w and -E: the conflict's exit status is 75 (or 124 after -w), or -E's", async () => {
    const lease = await files.write.acquire(undefined, "busy");
    try {
      const codes = await Promise.all([
        exitOf(dirArgs, "busy", "-n"),
        exitOf(dirArgs, "busy", "-n", "-E", "3"),
        exitOf(dirArgs, "busy", "--no-wait", "--conflict-exit-code", "0"),
        exitOf(dirArgs, "busy", "-w", "0.2"),
        exitOf(dirArgs, "busy", "-w", "200ms", "-E", "9"),
      ]);
      expect(codes).toEqual([75, 3, 0, 124, 9]);
    } finally {
      await lease.release();
    }
    expect(await exitOf(dirArgs, "busy", "-n", "-E", "3")).toBe(0);
  });

  it("-c runs a shell command (sh -c) holding the lock, with its exit status", async () => {
    const result = await runCli(["run", ...dirArgs, "--key", "shell", "-c", 'echo "$((6 * 7))" && exit 5']);
    expect(result).toMatchObject({ code: 5, stdout: "42\n" });
  });

  it("-s: shared runs hold beside shared holders; exclusive runs (the default, -x) exclude them and are excluded", async () => {
    const reader = await files.read.acquire(undefined, "catalog");
    try {
      expect(await exitOf(dirArgs, "catalog", "-s", "-n")).toBe(0);
      expect(await exitOf(dirArgs, "catalog", "--shared", "-n")).toBe(0);
      expect(await exitOf(dirArgs, "catalog", "-n")).toBe(75);
      expect(await exitOf(dirArgs, "catalog", "-x", "-n")).toBe(75);
    } finally {
      await reader.release();
    }
    const marker = join(directory, "catalog-done");
    const exclusive = startCli(["run", ...dirArgs, "--key", "catalog", "--", ...untilMarker(marker)]);
    await exclusive.waitFor(/ready/);
    expect(await files.read.tryAcquire(undefined, "catalog")).toBeUndefined();
    expect(await exitOf(dirArgs, "catalog", "-s", "-n")).toBe(75);
    writeFileSync(marker, "");
    expect((await exclusive.exited).code).toBe(0);
  });

  it("flock's own form: run [options] KEY command, run KEY -c 'command', status KEY", async () => {
    const plain = await runCli(["run", ...dirArgs, "-n", "fl", "echo", "ran"]);
    expect([plain.code, plain.stdout]).toEqual([0, "ran\n"]);
    const shell = await runCli(["run", ...dirArgs, "fl", "-c", "echo ran; exit 3"]);
    expect([shell.code, shell.stdout]).toEqual([3, "ran\n"]);
    const lease = await files.write.acquire(undefined, "fl");
    try {
      expect((await runCli(["status", ...dirArgs, "fl"])).code).toBe(0);
      expect((await runCli(["run", ...dirArgs, "-n", "fl", "echo", "ran"])).code).toBe(75);
    } finally {
      await lease.release();
    }
    expect((await runCli(["status", ...dirArgs, "fl"])).code).toBe(1);
    const bare = await runCli([]);
    expect(bare.code).toBe(64);
    expect(bare.stderr).toMatch(/Usage:/);
  });

  it("bad combinations and values are usage errors (64) naming them", async () => {
    const cases: Array<[string[], RegExp]> = [
      [["-c", "true", "--", "true"], /either -c COMMAND or a command, not both/],
      [["-s", "-x", "--", "true"], /either --shared or --exclusive/],
      [["-E", "256", "--", "true"], /--conflict-exit-code: expected an exit status from 0 to 255, received "256"/],
      [["-E", "x", "--", "true"], /received "x"/],
      [["-w", "soon", "--", "true"], /--wait: .*received "soon"/],
      [["-n", "-w", "1", "--", "true"], /either --wait or --no-wait/],
      [
        ["-s", "--redis", "redis://a:1", "--redis", "redis://b:1", "--redis", "redis://c:1", "--", "true"],
        /--shared needs one Redis server/,
      ],
    ];
    const results = await Promise.all(cases.map(([flags]) => runCli(["run", "--key", "k", ...flags])));
    results.forEach((result, index) => {
      expect(result.code, cases[index]?.[0].join(" ")).toBe(64);
      expect(result.stderr).toMatch(cases[index]?.[1] as RegExp);
    });
  });

  it.skipIf(!existsSync("/usr/bin/script"))(
    "waiting on a narrow terminal: one line, cut to its width, redrawn in place",
    () => {
      const lease = files.write.acquire(undefined, "narrow");
      return lease.then(async (held) => {
        try {
          const command = `stty cols 40; ${process.execPath} ${CLI} run --dir ${directory} --key narrow --wait 700ms -- true`;
          const result = spawnSync("script", ["-qfec", command, "/dev/null"], { encoding: "utf8" });
          const output = result.stdout;
          expect(output).toMatch(/gave up waiting for lock "narrow" after/);
          // Every redraw of the line ("\r\x1b[2K" then the text) fits in 39 columns and starts no new line.
          const draws = output.split("\r\x1b[2K").slice(1, -1);
          expect(draws.length).toBeGreaterThan(1);
          for (const draw of draws) {
            expect(draw).not.toContain("\n");
            expect(Array.from(draw).length).toBeLessThanOrEqual(39);
          }
          expect(draws[0]).toMatch(/^globallock: waiting for lock "narrow.*…$/);
        } finally {
          await held.release();
        }
      });
    },
  );
});

/**
 * A lock directory for the users of a group (mode 2775, group nogroup): root and `nobody` (run
 * through `setpriv --reuid`) exclude each other and take over each other's crashed locks. Root
 * only (the test drops privileges); the directory's parent is opened to `nobody`.
 */
const NOBODY = 65534;
const asRoot = process.getuid?.() === 0 && existsSync("/usr/bin/setpriv");
describe.skipIf(!asRoot)("a lock directory shared by two users (root and nobody)", () => {
  let shared: string;
  let base: string;
  /** The CLI as nobody runs it: a copy of the build that nobody can read, wherever the checkout is. */
  let nobodysCli: string;
  beforeAll(() => {
    base = tempLockDirectory("cli-shared");
    chmodSync(base, 0o755); // mkdtemp's 0700 would keep nobody out
    // The checkout may sit in a directory nobody cannot enter (a clone in a mkdtemp directory).
    const built = dirname(dirname(CLI)); // dist/ (the CLI is dist/cli/globallock.cjs)
    cpSync(built, join(base, "dist"), { recursive: true });
    nobodysCli = join(base, "dist", relative(built, CLI));
    shared = join(base, "locks");
    mkdirSync(shared);
    chownSync(shared, 0, NOBODY);
    chmodSync(shared, 0o2775);
  });
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  /** `globallock run` as nobody (uid and gid 65534, no other groups). */
  const dropPrivileges = [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups"];
  const asNobody = (args: string[]) =>
    spawnSync("setpriv", [...dropPrivileges, process.execPath, nobodysCli, "run", "--dir", shared, ...args], {
      encoding: "utf8",
      timeout: 30_000,
    });

  it("each excludes the other; each takes over the other's crashed lock; shared locks are shared", {
    timeout: 120_000,
  }, async () => {
    const marker = join(base, "done");
    // Root holds; nobody is refused (75).
    const root = startCli(["run", "--dir", shared, "--key", "k", "--", ...untilMarker(marker)]);
    await root.waitFor(/ready/);
    expect(asNobody(["--key", "k", "-n", "--", "true"]).status).toBe(75);
    // The lock's directory lets the group remove a crashed holder's entry.
    const lock = readdirSync(shared).find((name) => name.endsWith(".lock")) as string;
    expect(statSync(join(shared, lock)).mode & 0o7777).toBe(0o2775);
    // Root's run is killed (a crash): nobody takes the lock over at once.
    root.child.kill("SIGKILL");
    await root.exited;
    const after = asNobody(["--key", "k", "-n", "--", "sh", "-c", "echo nobody ran"]);
    expect({ status: after.status, stdout: after.stdout, stderr: after.stderr }).toEqual({
      status: 0,
      stdout: "nobody ran\n",
      stderr: "",
    });
    // Nobody holds; root is refused; nobody's crashed run is taken over by root.
    const nobody = spawn(
      "setpriv",
      [...dropPrivileges, process.execPath, nobodysCli, "run", "--dir", shared, "--key", "k", "--", "sleep", "30"],
      {
        stdio: "ignore",
      },
    );
    const pid = nobody.pid as number;
    try {
      await expect
        .poll(() => runCli(["status", "--dir", shared, "--key", "k"]).then((r) => r.code), { timeout: 20_000 })
        .toBe(0);
      expect(await exitOf(["--dir", shared], "k", "-n")).toBe(75);
    } finally {
      process.kill(pid, "SIGKILL");
    }
    expect(await exitOf(["--dir", shared], "k", "-n")).toBe(0);
    // Shared: nobody's shared run holds while root's shared run comes and goes; root's exclusive one is refused.
    const reader = startCli(["run", "--dir", shared, "--key", "r", "-s", "--", ...untilMarker(marker)]);
    await reader.waitFor(/ready/);
    expect(asNobody(["--key", "r", "-s", "-n", "--", "true"]).status).toBe(0);
    expect(asNobody(["--key", "r", "-n", "--", "true"]).status).toBe(75);
    writeFileSync(marker, "");
    expect((await reader.exited).code).toBe(0);
    expect(asNobody(["--key", "r", "-n", "--", "true"]).status).toBe(0);
  });
});

describe("flock(1)'s options, Redis", () => {
  let servers: RedisServer[] = [];
  let client: Redis;
  let redis: RedisReadWriteLocker;
  beforeAll(async () => {
    servers = await startServers(1);
    client = (servers[0] as RedisServer).client();
    redis = new RedisReadWriteLocker(client);
  });
  afterAll(async () => {
    await redis?.close();
    client?.disconnect();
    await stopServers(servers);
  });

  it("-s beside a shared holder; exclusive -n refused with -E's status; -c", async () => {
    const store = ["--redis", (servers[0] as RedisServer).url];
    const reader = await redis.read.acquire(undefined, "catalog");
    try {
      expect(await exitOf(store, "catalog", "-s", "-n")).toBe(0);
      expect(await exitOf(store, "catalog", "-n", "-E", "4")).toBe(4);
      expect(await exitOf(store, "catalog", "-w", "200ms")).toBe(124);
    } finally {
      await reader.release();
    }
    const writer = await redis.write.acquire(undefined, "catalog");
    try {
      expect(await exitOf(store, "catalog", "-s", "-n")).toBe(75);
    } finally {
      await writer.release();
    }
    const result = await runCli(["run", ...store, "--key", "catalog", "-c", "echo shell $((1 + 1))"]);
    expect(result).toMatchObject({ code: 0, stdout: "shell 2\n" });
  });
});
