/**
 * The `globallock` command as a user runs it: the BUILT executable (npm test builds first) in
 * child processes, against the file store (a temporary directory) and a real redis-server on a
 * free loopback port.
 */
import { execFileSync } from "node:child_process";
import { once } from "node:events";
import { existsSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWriteLockKey } from "../../src/file/file-backend.js";
import { FileLocker, FileReadWriteLocker, type Locker } from "../../src/index.js";
import { assertBuilt, nodeCommand, runCli, startCli } from "../helpers/cli.js";
import { tempLockDirectory } from "../helpers/file-harness.js";
import { type RedisServer, startServers, stopServers } from "../helpers/redis.js";
import { eventually } from "../helpers/wait.js";

/** A child that prints its start and end time (epoch ms) around a `ms` pause. */
const section = (label: string, ms: number): string[] =>
  nodeCommand(
    `const t = () => performance.timeOrigin + performance.now();` +
      `console.log("start ${label} " + t()); setTimeout(() => console.log("end ${label} " + t()), ${ms});`,
  );

/**
 * A child that prints "ready", runs until the file `marker` exists (whatever the machine's load),
 * then prints "finished".
 */
const untilMarker = (marker: string): string[] =>
  nodeCommand(
    `console.log("ready"); const t = setInterval(() => {` +
      ` if (require("fs").existsSync(${JSON.stringify(marker)})) { clearInterval(t); console.log("finished"); } }, 20);`,
  );

/** The events of a `--json` run: one JSON object per line of its stderr. */
// biome-ignore lint/suspicious/noExplicitAny: events are checked field by field.
const jsonLines = (text: string): any[] =>
  text
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line));

/** The [start, end] intervals printed by {@link section} children. */
function intervals(...outputs: string[]): Array<[number, number]> {
  const found: Array<[number, number]> = [];
  for (const output of outputs) {
    const start = /start \S+ ([\d.]+)/.exec(output);
    const end = /end \S+ ([\d.]+)/.exec(output);
    if (start && end) found.push([Number(start[1]), Number(end[1])]);
  }
  return found.sort((a, b) => a[0] - b[0]);
}

/** Two concurrent `run`s on one key: both complete, and their sections never interleave. */
async function expectSerialized(store: string[], key: string): Promise<void> {
  const runs = ["a", "b", "c"].map((label) => runCli(["run", ...store, "--key", key, "--", ...section(label, 250)]));
  const results = await Promise.all(runs);
  for (const result of results) expect(result.code, result.stderr).toBe(0);
  const spans = intervals(...results.map((r) => r.stdout));
  expect(spans).toHaveLength(3);
  for (let i = 1; i < spans.length; i++) {
    expect(spans[i]?.[0], JSON.stringify({ spans, stderr: results.map((r) => r.stderr) })).toBeGreaterThanOrEqual(
      spans[i - 1]?.[1] as number,
    );
  }
}

/**
 * A command that runs 60 s, under `--on-lost kill`: `loseLock` deletes its lock; the command is
 * stopped (125). The lease (2 s) is long enough that a loaded machine does not lose it on its own
 * before the command is ready; the loss is noticed at the next extension, within about 1 s.
 */
async function expectStoppedOnLoss(store: string[], key: string, loseLock: () => Promise<unknown>): Promise<void> {
  const child = nodeCommand(`console.log("ready"); setTimeout(() => console.log("finished"), 60_000);`);
  const cli = startCli(["run", ...store, "--key", key, "--expiry", "2s", "--on-lost", "kill", "--", ...child]);
  await cli.waitFor(/ready/);
  await loseLock();
  const result = await cli.exited;
  expect(result.code).toBe(125);
  expect(result.stdout).not.toContain("finished");
  expect(result.stderr).toMatch(new RegExp(`Lock "${key}" was lost.*stopping the command`));
}

let directory: string;
let dirArgs: string[];
/** Reads and deletes the lock files of the keys' writers (a run takes the `write` view's lock). */
let files: FileLocker;
let readWrite: FileReadWriteLocker;
/** Holds keys as an exclusive `globallock run` would. */
let writer: Locker;

beforeAll(() => {
  assertBuilt();
  directory = tempLockDirectory("cli");
  dirArgs = ["--dir", directory];
  files = new FileLocker({ directory });
  readWrite = new FileReadWriteLocker({ directory });
  writer = readWrite.write;
});
afterAll(async () => {
  await files.close();
  await readWrite.close();
  rmSync(directory, { recursive: true, force: true });
});

describe("globallock run, file store", () => {
  it("runs serialize on one key: the children's sections never interleave", async () => {
    await expectSerialized(dirArgs, "serial");
  });

  it("passes the command's exit status through and releases the lock", async () => {
    const result = await runCli(["run", ...dirArgs, "--key", "status", "--", ...nodeCommand("process.exit(7)")]);
    expect(result.code).toBe(7);
    expect((await writer.inspect(undefined, "status")).holders).toEqual([]);
    expect((await runCli(["run", ...dirArgs, "--key", "k", "--", "sh", "-c", "kill -TERM $$"])).code).toBe(143);
  });

  it("--no-wait exits 75 while someone holds the key; --wait 200ms gives up with 124 after about 200 ms", async () => {
    const lease = await writer.acquire(undefined, "busy");
    try {
      const noWait = await runCli(["run", ...dirArgs, "--key", "busy", "--no-wait", "--", "true"]);
      expect(noWait.code).toBe(75);
      const zero = await runCli(["run", ...dirArgs, "--key", "busy", "--wait", "0", "--json", "--", "true"]);
      expect(zero.code).toBe(75);
      expect(JSON.parse(zero.stderr.trim())).toMatchObject({ event: "not-acquired", reason: "held", key: "busy" });
      const timed = await runCli(["run", ...dirArgs, "--key", "busy", "--wait", "200ms", "--json", "--", "true"]);
      expect(timed.code).toBe(124);
      const events = jsonLines(timed.stderr);
      expect(events.map((e) => e.event)).toEqual(["waiting", "not-acquired"]);
      expect(events[0].holders).toMatchObject([{ owner: `${hostname()}:${process.pid}`, mode: "exclusive" }]);
      expect(events[1].waitedMs).toBeGreaterThanOrEqual(190);
      // Gave up after the wait, not after 200 s (a loaded machine may add seconds, not minutes).
      expect(events[1].waitedMs).toBeLessThan(20_000);
    } finally {
      await lease.release();
    }
  });

  it("forwards SIGTERM to the command and releases the lock only after it exited", async () => {
    const child = nodeCommand(
      `process.on("SIGTERM", () => { console.log("got SIGTERM"); setTimeout(() => { console.log("bye"); process.exit(0); }, 400); });` +
        `console.log("ready"); setInterval(() => {}, 1000);`,
    );
    const cli = startCli(["run", ...dirArgs, "--key", "signals", "--", ...child]);
    await cli.waitFor(/ready/);
    expect(await writer.tryAcquire(undefined, "signals")).toBeUndefined();
    cli.child.kill("SIGTERM");
    await cli.waitFor(/got SIGTERM/);
    // The command is shutting down: the lock is still held.
    expect((await writer.inspect(undefined, "signals")).holders).toMatchObject([
      { owner: `${hostname()}:${cli.child.pid}` },
    ]);
    const result = await cli.exited;
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/got SIGTERM\nbye/);
    const lease = await writer.tryAcquire(undefined, "signals");
    expect(lease).toBeDefined();
    await lease?.release();
  });

  // Linux only: elsewhere (no /proc, no setpriv) the command can outlive a killed wrapper (see --help).
  it.skipIf(process.platform !== "linux")(
    "a SIGKILLed run takes its command and the command's children with it: no second run beside them",
    async () => {
      const command = ["sh", "-c", 'sleep 300 & echo "pids $$ $!"; wait'];
      const cli = startCli(["run", ...dirArgs, "--key", "killed", "--expiry", "2s", "--", ...command]);
      await cli.waitFor(/pids \d+ \d+/);
      const pids = (/pids (\d+) (\d+)/.exec(cli.stdout) as RegExpExecArray).slice(1).map(Number);
      try {
        // Not `cli.exited`: that waits for the output pipes, which survivors of the command keep open.
        const killed = once(cli.child, "exit");
        cli.child.kill("SIGKILL");
        await killed;
        // Once the dead wrapper's lease has run out, a second run gets the key; its command reports
        // which processes of the first run are still running.
        const probe = pids.map(
          (pid) => `[ -d /proc/${pid} ] && ! grep -q '^State:.*zombie' /proc/${pid}/status && echo "running ${pid}";`,
        );
        let second: Awaited<ReturnType<typeof runCli>>;
        do {
          second = await runCli([
            "run",
            ...dirArgs,
            "--key",
            "killed",
            "--no-wait",
            "--",
            "sh",
            "-c",
            `${probe.join(" ")} echo probed`,
          ]);
        } while (second.code === 75);
        expect(second.stdout).toBe("probed\n");
        expect(second.code).toBe(0);
        for (const pid of pids) await eventually(() => !running(pid), 20_000);
      } finally {
        for (const pid of pids) if (running(pid)) process.kill(pid, "SIGKILL");
      }
    },
  );

  it("SIGTERM while waiting gives up at once (143), without running the command", async () => {
    const lease = await writer.acquire(undefined, "waiting");
    try {
      const cli = startCli(["run", ...dirArgs, "--key", "waiting", "--json", "--", "echo", "ran"]);
      await cli.waitFor(/"waiting"/, "stderr");
      cli.child.kill("SIGTERM");
      const result = await cli.exited;
      expect(result.code).toBe(143);
      expect(result.stdout).not.toContain("ran");
      expect(result.stderr).toContain('"interrupted"');
    } finally {
      await lease.release();
    }
  });

  it("a lock deleted behind its back: warn prints the message; --on-lost kill stops the command (125)", async () => {
    const marker = join(directory, "warn-done");
    const warn = startCli(["run", ...dirArgs, "--key", "lost-warn", "--expiry", "400ms", "--", ...untilMarker(marker)]);
    await warn.waitFor(/ready/);
    rmSync(files.lockPath(readWriteLockKey("lost-warn")), { recursive: true });
    await warn.waitFor(/warning: Lock "lost-warn" was lost/, "stderr");
    await expectStoppedOnLoss(dirArgs, "lost-kill", async () =>
      rmSync(files.lockPath(readWriteLockKey("lost-kill")), { recursive: true }),
    );
    writeFileSync(marker, "");
    const warned = await warn.exited;
    expect(warned.code).toBe(0);
    expect(warned.stdout).toContain("finished");
  });

  it("--on-lost kill: a command that ignores SIGTERM gets SIGKILL after --kill-after", async () => {
    const stubborn = nodeCommand(
      `process.on("SIGTERM", () => console.log("ignored")); console.log("ready"); setInterval(() => {}, 1000);`,
    );
    const cli = startCli([
      "run",
      ...dirArgs,
      "--key",
      "stubborn",
      "--expiry",
      "2s", // not lost on its own before "ready" on a loaded machine
      "--on-lost",
      "kill",
      "--kill-after",
      "300ms",
      "--json",
      "--",
      ...stubborn,
    ]);
    await cli.waitFor(/ready/);
    rmSync(files.lockPath(readWriteLockKey("stubborn")), { recursive: true });
    const result = await cli.exited;
    expect(result.code).toBe(125);
    expect(result.stdout).toContain("ignored");
    const events = jsonLines(result.stderr);
    expect(events.map((e) => e.event)).toEqual([
      "acquired",
      "started",
      "lost",
      "killing",
      "killing",
      "exited",
      "released",
    ]);
    expect(events.filter((e) => e.event === "killing").map((e) => e.signal)).toEqual(["SIGTERM", "SIGKILL"]);
    expect(events.find((e) => e.event === "exited")).toMatchObject({ signal: "SIGKILL" });
    // The lock was deleted, not taken by another holder.
    expect(events.find((e) => e.event === "released")).toMatchObject({ outcome: "expired" });
  });

  it("exports the fencing token to the command; tokens rise from run to run", async () => {
    const print = ["sh", "-c", 'echo "token=$LOCK_TOKEN"'];
    const first = await runCli(["run", ...dirArgs, "--key", "fenced", "--fencing-env", "LOCK_TOKEN", "--", ...print]);
    const second = await runCli(["run", ...dirArgs, "--key", "fenced", "--fencing-env", "LOCK_TOKEN", "--", ...print]);
    expect(first.stdout).toBe("token=1\n");
    expect(second.stdout).toBe("token=2\n");
  });

  it("reports usage errors (64), a missing command (127) and an unwritable store (69) with the bad value named", async () => {
    const cases: Array<[string[], number, RegExp]> = [
      [["run", "--key", "k", "--wait", "soon", "--", "true"], 64, /--wait: .*received "soon"/],
      [
        ["run", "--key", "k", "--on-lost", "panic", "--", "true"],
        64,
        /--on-lost: expected warn or kill, received "panic"/,
      ],
      [
        ["run", "--key", "k", "--expiry", "50ms", "--", "true"],
        64,
        /--expiry: expected at least 200ms, received "50ms"/,
      ],
      [["run", "--key", "k"], 64, /no command to run/],
      [["run", "--", "true"], 64, /no key: give the lock.s name as KEY/],
      [["run", "--key", "", "--", "true"], 64, /the key is empty/],
      [[], 64, /no command given\nUsage:\n {2}globallock run \[options\] KEY command/],
      [["run", "--key", "k", "--bogus", "--", "true"], 64, /Unknown option '--bogus'/],
      [["frobnicate"], 64, /unknown command "frobnicate"/],
      [
        ["run", "--key", "k", "--redis", "localhost:6379", "--", "true"],
        64,
        /--redis: expected a URL .*"localhost:6379"/,
      ],
      [["run", ...dirArgs, "--key", "k", "--", "no-such-command-here"], 127, /cannot run "no-such-command-here"/],
      [["run", "--dir", "/proc/self/globallock", "--key", "k", "--", "true"], 69, /\/proc\/self\/globallock/],
    ];
    const results = await Promise.all(cases.map(([args]) => runCli(args)));
    results.forEach((result, index) => {
      const [args, code, message] = cases[index] as [string[], number, RegExp];
      expect(result.code, args.join(" ")).toBe(code);
      expect(result.stderr).toMatch(message);
    });
  });

  it("status prints the holder (--owner, mode, time left, fencing token) and waiters, held (0) or free (1); --json too", async () => {
    const marker = join(directory, "inspected-done");
    const command = nodeCommand(
      `console.log("token=" + process.env.T); const t = setInterval(() => {` +
        ` if (require("fs").existsSync(${JSON.stringify(marker)})) clearInterval(t); }, 20);`,
    );
    const owner = "nightly backup (ops)";
    const cli = startCli([
      "run",
      ...dirArgs,
      "--key",
      "inspected",
      "--owner",
      owner,
      "--fencing-env",
      "T",
      "--",
      ...command,
    ]);
    await cli.waitFor(/token=\d+/);
    const token = /token=(\d+)/.exec(cli.stdout)?.[1] as string;
    const held = await runCli(["status", ...dirArgs, "--key", "inspected"]);
    expect(held.code).toBe(0);
    const [before, after] = [
      `inspected: held by ${owner} (exclusive, lease ends in `,
      ` s unless extended, fencing token ${token}) (file store ${directory})\n`,
    ].map((text) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
    expect(held.stdout).toMatch(new RegExp(`^${before}[\\d.]+${after}$`));
    const json = await runCli(["status", ...dirArgs, "--key", "inspected", "--json"]);
    const parsed = JSON.parse(json.stdout);
    expect(parsed).toEqual({
      key: "inspected",
      store: `file store ${directory}`,
      held: true,
      holders: [{ owner, mode: "exclusive", weight: 1, expiresInMs: expect.any(Number), fencingToken: token }],
      waiting: 0,
    });
    expect(parsed.holders[0].expiresInMs).toBeGreaterThan(0);
    expect(parsed.holders[0].expiresInMs).toBeLessThanOrEqual(30_000);
    writeFileSync(marker, "");
    expect((await cli.exited).code).toBe(0);
    const free = await runCli(["status", ...dirArgs, "--key", "inspected"]);
    expect(free.code).toBe(1);
    expect(free.stdout).toBe(`inspected: free (file store ${directory})\n`);
    const freeJson = await runCli(["status", ...dirArgs, "--key", "inspected", "--json"]);
    expect(freeJson.code).toBe(1);
    expect(JSON.parse(freeJson.stdout)).toEqual({
      key: "inspected",
      store: `file store ${directory}`,
      held: false,
      holders: [],
      waiting: 0,
    });
  });

  it("--max-hold: the lease is no longer extended and is lost (max-hold); --on-lost warn keeps the command running", async () => {
    const marker = join(directory, "capped-done");
    const cli = startCli([
      "run",
      ...dirArgs,
      "--key",
      "capped",
      "--expiry",
      "1s",
      "--max-hold",
      "1s",
      "--json",
      "--",
      ...untilMarker(marker),
    ]);
    await cli.waitFor(/ready/);
    await cli.waitFor(/"event":"lost"/, "stderr", 20_000);
    // Lost: the key is free while the command still runs (nothing killed it).
    expect((await runCli(["status", ...dirArgs, "--key", "capped"])).code).toBe(1);
    expect(cli.stdout).not.toContain("finished");
    writeFileSync(marker, "");
    const result = await cli.exited;
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("finished");
    const events = jsonLines(result.stderr);
    expect(events.map((e) => e.event)).toEqual(["acquired", "started", "lost", "exited", "released"]);
    expect(events.find((e) => e.event === "lost")).toMatchObject({ reason: "max-hold", action: "warn" });
  });

  it("--max-hold with --on-lost kill stops the command when the cap is reached (125); bad caps are usage errors", async () => {
    const child = nodeCommand(`console.log("ready"); setTimeout(() => console.log("finished"), 60_000);`);
    const capped = [
      "run",
      ...dirArgs,
      "--key",
      "capped-kill",
      "--expiry",
      "1s",
      "--max-hold",
      "1s",
      "--on-lost",
      "kill",
    ];
    const result = await runCli([...capped, "--", ...child]);
    expect(result.code).toBe(125);
    expect(result.stdout).not.toContain("finished");
    expect(result.stderr).toMatch(/held for its maxHold.*stopping the command/);
    const bad = await Promise.all([
      runCli(["run", ...dirArgs, "--key", "k", "--max-hold", "0", "--", "true"]),
      runCli(["run", ...dirArgs, "--key", "k", "--max-hold", "later", "--", "true"]),
      // Shorter than the lease (30 s by default): refused by the locker.
      runCli(["run", ...dirArgs, "--key", "k", "--max-hold", "1s", "--", "true"]),
      runCli(["run", ...dirArgs, "--key", "k", "--owner", "", "--", "true"]),
      runCli(["run", ...dirArgs, "--key", "k", "--owner", "x".repeat(257), "--", "true"]),
    ]);
    expect(bad.map((r) => r.code)).toEqual([64, 64, 64, 64, 64]);
    expect(bad[0]?.stderr).toMatch(/--max-hold: expected a positive duration, received "0"/);
    expect(bad[1]?.stderr).toMatch(/--max-hold: expected a duration .*received "later"/);
    expect(bad[2]?.stderr).toMatch(/maxHold/);
    expect(bad[3]?.stderr).toMatch(/--owner: expected a name of 1 to 256 bytes/);
    expect(bad[4]?.stderr).toMatch(/--owner: expected a name of 1 to 256 bytes/);
  });

  it("is the package's bin: the built file, executable, with a node shebang", () => {
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8"));
    expect(pkg.bin).toEqual({ globallock: "./dist/cli/globallock.cjs" });
    expect(CLI_PATH()).toMatch(/dist\/cli\/globallock\.cjs$/);
    expect(readFileSync(CLI_PATH(), "utf8").startsWith("#!/usr/bin/env node\n")).toBe(true);
    expect(statSync(CLI_PATH()).mode & 0o111).toBe(0o111);
  });

  it("--help shows usage, examples and the exit codes", async () => {
    const help = await runCli(["--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/globallock run \[options\] KEY command \[args\.\.\.\]/);
    expect(help.stdout).toMatch(/globallock run \[options\] --key KEY -- command \[args\.\.\.\]/);
    expect(help.stdout).toMatch(/Examples:/);
    for (const code of ["64", "69", "75", "124", "125", "127"]) expect(help.stdout).toContain(`  ${code} `);
  });

  it.skipIf(!existsSync("/usr/bin/script"))("on a terminal, shows one waiting line with the holder", async () => {
    const lease = await writer.acquire(undefined, "tty");
    try {
      const command = `${process.execPath} ${CLI_PATH()} run --dir ${directory} --key tty --wait 700ms -- true`;
      const output = execFileSync("script", ["-qfec", command, "/dev/null"], { encoding: "utf8" }).toString();
      expect(output).toMatch(new RegExp(`waiting for lock "tty" \\(held by ${hostname()}:${process.pid} \\(exclusive`));
      expect(output).toContain("\r\x1b[2K");
      expect(output).toMatch(/gave up waiting for lock "tty" after/);
    } catch (error) {
      // script exits with the command's status (124 here): its output is on the error.
      const output = String((error as { stdout?: unknown }).stdout);
      expect(output).toMatch(new RegExp(`waiting for lock "tty" \\(held by ${hostname()}:${process.pid} \\(exclusive`));
      expect(output).toMatch(/gave up waiting for lock "tty" after/);
    } finally {
      await lease.release();
    }
  });
});

/** Whether `pid` is a live process (`process.kill(pid, 0)` succeeds and it is not a zombie). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, "utf8"));
  } catch {
    return false;
  }
}

function CLI_PATH(): string {
  return new URL("../../dist/cli/globallock.cjs", import.meta.url).pathname;
}

describe("globallock run, Redis", () => {
  let servers: RedisServer[] = [];
  let admin: Redis;
  beforeAll(async () => {
    servers = await startServers(3);
    admin = (servers[0] as RedisServer).client();
  });
  afterAll(async () => {
    admin?.disconnect();
    await stopServers(servers);
  });
  const one = (): string[] => ["--redis", (servers[0] as RedisServer).url];

  it("runs serialize on one key on one server, and on a three-server quorum", async () => {
    await expectSerialized(one(), "redis-serial");
    await expectSerialized(
      servers.flatMap((server) => ["--redis", server.url]),
      "quorum-serial",
    );
  });

  it("takes the URL from GLOBALLOCK_REDIS_URL; status shows the holder; --no-wait exits 75", async () => {
    const env = { GLOBALLOCK_REDIS_URL: (servers[0] as RedisServer).url };
    const cli = startCli(["run", "--key", "env", "--", ...untilMarker(join(directory, "env-done"))], env);
    await cli.waitFor(/ready/);
    expect(await admin.pttl("globallock:rw:env")).toBeGreaterThan(0);
    const status = await runCli(["status", "--key", "env"], env);
    expect(status.code).toBe(0);
    expect(status.stdout).toMatch(/env: held by \S+:\d+ \(exclusive, lease ends in/);
    expect((await runCli(["run", "--key", "env", "--no-wait", "--", "true"], env)).code).toBe(75);
    writeFileSync(join(directory, "env-done"), "");
    expect((await cli.exited).code).toBe(0);
    expect(await admin.exists("globallock:rw:env")).toBe(0);
    expect((await runCli(["status", "--key", "env"], env)).code).toBe(1);
  });

  it("a key deleted behind its back is reported lost; --on-lost kill stops the command (125)", async () => {
    await expectStoppedOnLoss(one(), "redis-lost", () =>
      eventually(async () => (await admin.del("globallock:rw:redis-lost")) === 1),
    );
  });

  it("an unreachable server is a clear error with status 69", async () => {
    const down = await startServers(1);
    const url = (down[0] as RedisServer).url;
    await stopServers(down);
    const result = await runCli(["run", "--redis", url, "--key", "k", "--", "true"]);
    expect(result.code).toBe(69);
    expect(result.stderr).toMatch(new RegExp(`cannot reach ${url.replace(/\./g, "\\.")}.*ECONNREFUSED`));
  });
});
