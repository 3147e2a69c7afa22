/**
 * A key's fencing counter in the lock directory: `H.fence/<n>`, one empty file named by the last
 * token issued. Moved up by `rename(H.fence/n, H.fence/n+1)`, which succeeds only for the caller
 * that read `n` while it was current, so the counter only rises, even when a holder that lost its
 * lock meanwhile writes late.
 */
import { rename, unlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { codeOf } from "./fs-errors.js";
import type { FileStore } from "./store.js";

/** Rounds of a draw that found the counter changing under it before it gives up. */
const ROUNDS = 64;

/**
 * The next fencing token of `hash` in `store`'s directory (call only while holding its lock, from
 * an operation in one of the store's slots): 1 for the first grant, then one more than the last.
 */
export async function drawFencingToken(store: FileStore, hash: string): Promise<bigint> {
  const dir = join(store.directory, `${hash}.fence`);
  for (let round = 0; round < ROUNDS; round++) {
    const values = await fenceValues(store, dir);
    const last = values.reduce((max, value) => (value > max ? value : max), 0n);
    for (const value of values) {
      if (value < last) await unlink(join(dir, String(value))).catch(() => undefined);
    }
    try {
      if (values.length === 0) await writeFile(join(dir, "1"), "", { flag: "wx" });
      else await rename(join(dir, String(last)), join(dir, String(last + 1n)));
      return last + 1n;
    } catch (error) {
      if (codeOf(error) !== "ENOENT" && codeOf(error) !== "EEXIST") {
        throw store.unavailable("issue a fencing token in", error);
      }
    }
  }
  throw store.unavailable("issue a fencing token in", new Error("the counter kept changing"));
}

/** The values in the counter directory `dir` (created when missing: none yet). */
async function fenceValues(store: FileStore, dir: string): Promise<bigint[]> {
  const names = await store.names(dir, "read a fencing counter in");
  if (names === undefined) {
    await store.call("create a fencing counter in", () => store.makeDirectory(dir, 0o700).catch(ignoreExists));
    return [];
  }
  return names.filter((name) => /^\d{1,30}$/.test(name)).map((name) => BigInt(name));
}

function ignoreExists(error: unknown): void {
  if (codeOf(error) !== "EEXIST") throw error;
}
