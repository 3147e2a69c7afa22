/**
 * Scenario 15: MemcachedLocker against its raw floor, on a Memcached this scenario starts
 * (support/memcached-server.mjs: a free loopback port).
 *
 * - Uncontended (bench/lib/floor-rows.mjs): sequential lock + release on one key, MemcachedLocker
 *   (default options) and the floor (bench/lib/store-floors.mjs: `add`, then `gets` and a `cas`
 *   stored expired) on the same client, interleaved rounds; the rate as a ratio to the floor's.
 * - Contended (bench/lib/store-contention.mjs): 8 workers on one key, each with its own
 *   MemcachedLocker on its own client (lockers of this process on one server hear each other's
 *   releases; Memcached keeps no queue, so the next holder is whichever `add` lands first).
 *
 * The server is marked as having kept its items (the restart guard's epoch item written, as the
 * test fixture does): to a locker, a server that starts for the first time is one that lost its
 * items, and it grants nothing for a lease's length. Runnable alone after `npm run build`:
 * `BENCH_ONLY=memcached node bench/run.mjs`.
 */
import { MEMCACHED_CLIENT_OPTIONS, MemcachedLocker } from "globallock";
import { MemcachedServer } from "../../support/memcached-server.mjs";
import { onCleanup } from "../lib/cleanup.mjs";
import { QUICK } from "../lib/config.mjs";
import { measureAgainstFloor, pairOn, renderStoreSection } from "../lib/floor-rows.mjs";
import { measureStoreContention, withShareOfLimit } from "../lib/store-contention.mjs";
import { memcachedFloor } from "../lib/store-floors.mjs";

const CONFIG = QUICK
  ? { rounds: 2, opsPerRound: 300, warmUpOps: 100 }
  : { rounds: 5, opsPerRound: 2000, warmUpOps: 300 };

/** The restart guard's epoch item of the default prefix (src/memcached/layout.ts). */
const EPOCH = "globallock:#epoch";

/** Runs the scenario. */
export async function runMemcached(context = {}) {
  const log = context.log ?? (() => undefined);
  const server = await MemcachedServer.start();
  onCleanup(() => server.killSync());
  const clients = [];
  const client = () => {
    const made = server.client({ ...MEMCACHED_CLIENT_OPTIONS });
    clients.push(made);
    return made;
  };
  try {
    await server.command(`set ${EPOCH} 0 0 1\r\n1`);
    const shared = client();
    const locker = new MemcachedLocker(shared);
    const uncontended = await measureAgainstFloor(
      [
        pairOn("locker", "MemcachedLocker", locker, "k"),
        pairOn("floor", "raw floor: add, then gets + cas stored expired", memcachedFloor(shared), "floor", true),
      ],
      CONFIG,
    );
    await locker.close();
    const contender = {
      id: "memcached",
      label: "MemcachedLocker, a client each",
      open() {
        const own = new MemcachedLocker(client());
        return { lock: (key) => own.lock(undefined, key), close: () => own.close() };
      },
    };
    const contended = withShareOfLimit(
      await measureStoreContention([contender], "contended", (line) => log(`memcached: ${line}`)),
      uncontended[0].p50Us / 1000,
    );
    const version = /VERSION (\S+)/.exec(await server.command("version"))?.[1];
    return { store: `Memcached ${version ?? "(version unknown)"}`, config: CONFIG, uncontended, contended };
  } finally {
    for (const made of clients) made.end();
    await server.stop();
  }
}

/** The scenario's Markdown section. */
export function renderMemcached(results) {
  return renderStoreSection("15. Memcached", results);
}
