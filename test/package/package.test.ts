/** The published shape: ESM and CommonJS entry points with the same exports, types-first map. */

import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, posix, resolve } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { typeCheckConsumer } from "../helpers/consumer.js";

const root = resolve(import.meta.dirname, "../..");
const run = promisify(execFile);

describe("package (built by npm test before vitest runs)", () => {
  it("has a types-first exports map for import and require", () => {
    const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
    for (const condition of ["import", "require"]) {
      expect(Object.keys(pkg.exports["."][condition])[0]).toBe("types");
    }
    expect(pkg.sideEffects).toBe(false);
    expect(pkg.peerDependencies.ioredis).toBeDefined();
    // No dependencies: redlock (a Redlock quorum's) is an optional peer, as the client libraries are.
    expect(pkg.dependencies).toBeUndefined();
    expect(pkg.peerDependencies.redlock).toBe("5.0.0-beta.2");
    expect(pkg.peerDependenciesMeta.redlock).toEqual({ optional: true });
    expect(pkg.devDependencies.redlock).toBe("5.0.0-beta.2");
  });

  it("carries what its Markdown links to: every relative link of a packed .md file resolves in the tarball", async () => {
    const { stdout } = await run("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: root });
    const packed = new Set(
      (JSON.parse(stdout) as Array<{ files: Array<{ path: string }> }>)[0]?.files.map((f) => f.path),
    );
    const docs = [...packed].filter((path) => path.endsWith(".md"));
    expect(docs).toEqual(expect.arrayContaining(["README.md", "CHANGELOG.md", "docs/reference.md"]));
    // Kept in the repository, out of the package (the benchmark tables: 84 kB nobody needs to run
    // the library): a link to one must find it in the repository.
    const repositoryOnly = ["docs/benchmarks.md"];
    expect(repositoryOnly.filter((path) => packed.has(path))).toEqual([]);
    const broken: string[] = [];
    for (const doc of docs) {
      for (const match of readFileSync(join(root, doc), "utf8").matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)) {
        const target = match[1] as string;
        if (/^[a-z]+:/.test(target)) continue;
        const resolved = posix.normalize(posix.join(posix.dirname(doc), target)).replace(/\/$/, "");
        if (repositoryOnly.includes(resolved) && existsSync(join(root, resolved))) continue;
        if (!packed.has(resolved) && ![...packed].some((path) => path.startsWith(`${resolved}/`))) {
          broken.push(`${doc} -> ${target}`);
        }
      }
    }
    expect(broken).toEqual([]);
  });

  it("loads the same API through require and import", async () => {
    const required = createRequire(join(root, "package.json"))("globallock");
    const packageName = "globallock"; // resolved at run time: dist/ is built by then, not at type-check time
    const imported: Record<string, unknown> = await import(packageName);
    const names = Object.keys(required).sort();
    expect(names).toEqual(Object.keys(imported).sort());
    expect(names).toEqual(expect.arrayContaining(["MemoryLocker", "RedisLocker", "lockAndDo", "tryLockAndDo"]));
  });

  it("exports the test helpers at globallock/testing, for import and require", async () => {
    const required = createRequire(join(root, "package.json"))("globallock/testing");
    const subpath = "globallock/testing"; // resolved at run time, like the root above
    const imported: Record<string, unknown> = await import(subpath);
    expect(Object.keys(required).sort()).toEqual(Object.keys(imported).sort());
    expect(typeof imported.FaultyLocker).toBe("function");
  });

  it("type-checks and loads a consumer (ESM and CommonJS resolution), without redlock types or the redis package", {
    timeout: 120_000,
  }, async () => {
    // The declarations import neither redlock nor a client library: ioredis alone is enough.
    await typeCheckConsumer(
      `
import { type Locker, lockAndDo, MemoryLocker, RedisLocker, type ReleaseFunc } from "globallock";
import { Redis } from "ioredis";
const memory: Locker = new MemoryLocker();
const redis: Locker = new RedisLocker(new Redis({ lazyConnect: true }), { expiry: 1000, prefix: "x:" });
async function use(locker: Locker): Promise<number> {
  const release: ReleaseFunc = await locker.lock(undefined, "k");
  await release();
  const [ok, again] = await locker.tryLock(AbortSignal.timeout(10), "k");
  await again();
  return (await lockAndDo(locker, undefined, "k", async () => (ok ? 1 : 2)));
}
void use(memory); void use(redis);
`,
      ["redis", "redis5", "@redis"],
    );
  });
});

describe("errors across module copies (the dual-package hazard)", () => {
  it("instanceof works between the CommonJS and the ESM build, for the base class and each subclass", async () => {
    const required = createRequire(join(root, "package.json"))("globallock");
    const packageName = "globallock";
    const imported = await import(packageName);
    expect(required.GlobalLockError).not.toBe(imported.GlobalLockError); // two copies
    const fromCjs = new required.InvalidArgumentError("key", "a string", 1);
    const fromEsm = new imported.LockerClosedError();
    expect(fromCjs).toBeInstanceOf(imported.GlobalLockError);
    expect(fromCjs).toBeInstanceOf(imported.InvalidArgumentError);
    expect(fromCjs).not.toBeInstanceOf(imported.LockerClosedError);
    expect(fromEsm).toBeInstanceOf(required.GlobalLockError);
    expect(fromEsm).toBeInstanceOf(required.LockerClosedError);
    expect(fromEsm).not.toBeInstanceOf(required.StoreUnavailableError);
    expect(fromCjs).toBeInstanceOf(Error);
    expect(new Error("plain")).not.toBeInstanceOf(imported.GlobalLockError);
    expect({ code: "ERR_GLOBALLOCK_CLOSED" }).not.toBeInstanceOf(required.GlobalLockError);
    // The brand is not enumerable: logs and JSON stay as they were.
    expect(Object.keys(fromCjs)).not.toContain(Symbol.for("globallock.error.classes"));
    expect(JSON.stringify(fromEsm)).not.toContain("classes");
  });

  it("a user's subclass of an error stays an instance of it and of the library's classes", async () => {
    const imported = await import("../../src/index.js");
    class MyLost extends imported.LockLostError {}
    const error = new MyLost("k", "taken");
    expect(error).toBeInstanceOf(MyLost);
    expect(error).toBeInstanceOf(imported.LockLostError);
    expect(error).toBeInstanceOf(imported.GlobalLockError);
    expect(new imported.LockLostError("k", "taken")).not.toBeInstanceOf(MyLost);
  });
});
