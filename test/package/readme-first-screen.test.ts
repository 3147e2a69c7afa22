/**
 * The README's first screen, run as written from a fresh copy of the repository (its tracked
 * files), offline: the Install block's `npm pack` (once), the script lines through `sh` (the Redis
 * line against a redis-server of the tests' own, on a free port given as $REDIS_PORT, which the
 * line reads), and the `npm install -g` of the tarball into a temporary prefix. Only `git clone`
 * (the copy) and `npm ci` (this repository's node_modules, linked: no registry here) are stood in for.
 */
import { execFile, execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RedisServer, startServers, stopServers } from "../helpers/redis.js";

const run = promisify(execFile);
const root = resolve(import.meta.dirname, "../..");

/** The shell blocks of the README before its first `##` section after Install ("A first lock"). */
function firstScreenBlocks(readme: string): string[][] {
  const screen = readme.slice(0, readme.indexOf("\n## A first lock"));
  return [...screen.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) =>
    (match[1] as string).split("\n").filter((line) => line.trim() !== ""),
  );
}

describe("the README's first screen, from a fresh copy", () => {
  let work: string;
  let clone: string;
  let servers: RedisServer[] = [];
  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "globallock-readme-"));
    clone = join(work, "globallock");
    const tracked = execFileSync("git", ["ls-files", "-z"], { cwd: root, encoding: "utf8" }).split("\0");
    for (const file of tracked.filter(Boolean)) {
      if (existsSync(join(root, file))) cpSync(join(root, file), join(clone, file), { recursive: true });
    }
    symlinkSync(join(root, "node_modules"), join(clone, "node_modules")); // `npm ci`, offline
    servers = await startServers(1);
  }, 60_000);
  afterAll(async () => {
    await stopServers(servers);
    rmSync(work, { recursive: true, force: true });
  });

  it("runs every command as written (npm pack, npx globallock on files and Redis, npm install -g)", {
    timeout: 240_000,
  }, async () => {
    const readme = readFileSync(join(clone, "README.md"), "utf8");
    const [install, scripts] = firstScreenBlocks(readme);
    expect(install?.[0]).toMatch(/^git clone .* globallock && cd globallock$/);
    expect(install?.[1]).toMatch(/^npm ci && npm pack\b/);
    const env = {
      ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("GLOBALLOCK_"))),
      REDIS_PORT: String((servers[0] as RedisServer).port),
      npm_config_offline: "true",
      npm_config_update_notifier: "false",
      npm_config_prefix: join(work, "global"),
    };
    const sh = (line: string) => run("sh", ["-c", line], { cwd: clone, env, timeout: 180_000 });
    await sh((install?.[1] ?? "").replace(/^npm ci && /, ""));
    expect(existsSync(join(clone, "globallock-0.1.0.tgz"))).toBe(true);

    expect(scripts).toHaveLength(2);
    const [files, redis] = scripts as [string, string];
    expect(files).toMatch(/^npx globallock run --key demo -- sleep 2\b/);
    expect(redis).toMatch(/^npx globallock run --redis "redis:\/\/127\.0\.0\.1:\$\{REDIS_PORT:-6379\}"/);
    // Two terminals: both runs of each line end well (the second waited for the first).
    const results = await Promise.allSettled([sh(files), sh(files), sh(redis), sh(redis)]);
    expect(results.map((result) => result.status)).toEqual(["fulfilled", "fulfilled", "fulfilled", "fulfilled"]);
    // The Redis line locked on the test's redis-server.
    const client = (servers[0] as RedisServer).client();
    try {
      expect(await client.info("commandstats")).toMatch(/cmdstat_(evalsha|eval|set):calls=\d+/);
    } finally {
      client.disconnect();
    }

    // "Elsewhere": the tarball installed globally gives the `globallock` command (no registry needed
    // for globallock itself: it has no dependencies; ioredis is linked in as the registry would).
    const global = readme.match(/`(npm install -g \.\/globallock-0\.1\.0\.tgz) ioredis`/)?.[1];
    expect(global).toBeDefined();
    await sh(global as string);
    const bin = join(work, "global", "bin", "globallock");
    const { stdout } = await run(bin, ["--version"], { env });
    expect(stdout).toBe("0.1.0\n");
    const installed = join(work, "global", "lib", "node_modules");
    symlinkSync(join(root, "node_modules", "ioredis"), join(installed, "ioredis"));
    await run(bin, ["run", "--redis", (servers[0] as RedisServer).url, "--key", "global", "--", "true"], { env });
  });
});
