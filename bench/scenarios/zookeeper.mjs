/**
 * Scenario 14: ZooKeeperLocker against its raw floor, on a one-node ZooKeeper this scenario starts
 * (support/zookeeper-server.mjs: a temp dir, a free loopback port; `forceSync=no`, so writes do
 * not wait for the disk).
 *
 * - Uncontended (bench/lib/floor-rows.mjs): sequential lock + release on one key, ZooKeeperLocker
 *   (default options) and the floor (bench/lib/store-floors.mjs: an ephemeral sequential node
 *   created and the key node's children read in one round trip, the node deleted) on the same
 *   client (one session), interleaved rounds; the rate as a ratio to the floor's.
 * - Contended (bench/lib/store-contention.mjs): 8 workers on one key, each with its own
 *   ZooKeeperLocker on its own client (its own session, as separate processes would have).
 *
 * Runnable alone after `npm run build`: `BENCH_ONLY=zookeeper node bench/run.mjs`.
 */
import { ZooKeeperLocker } from "globallock";
import { fourLetterWord, ZooKeeperEnsemble } from "../../support/zookeeper-server.mjs";
import { onCleanup } from "../lib/cleanup.mjs";
import { QUICK } from "../lib/config.mjs";
import { measureAgainstFloor, pairOn, renderStoreSection } from "../lib/floor-rows.mjs";
import { measureStoreContention, withShareOfLimit } from "../lib/store-contention.mjs";
import { zooKeeperFloor } from "../lib/store-floors.mjs";

const CONFIG = QUICK
  ? { rounds: 2, opsPerRound: 300, warmUpOps: 100 }
  : { rounds: 5, opsPerRound: 2000, warmUpOps: 300 };

/** The session timeout of every client here: the lockers' default expiry (30 s) fits in it. */
const SESSION_MS = 30_000;

/** A client of `ensemble`, once connected. */
async function connected(ensemble) {
  const client = ensemble.client({ sessionTimeout: SESSION_MS });
  await new Promise((resolve) => {
    if (client.getState().name === "SYNC_CONNECTED") resolve();
    else client.once("connected", resolve);
  });
  return client;
}

/** Runs the scenario. */
export async function runZooKeeper(context = {}) {
  const log = context.log ?? (() => undefined);
  const ensemble = await ZooKeeperEnsemble.start();
  onCleanup(() => ensemble.killSync());
  const clients = [];
  try {
    const client = await connected(ensemble);
    clients.push(client);
    const locker = new ZooKeeperLocker(client);
    const uncontended = await measureAgainstFloor(
      [
        pairOn("locker", "ZooKeeperLocker", locker, "k"),
        pairOn(
          "floor",
          "raw floor: create ephemeral sequential + getChildren, delete",
          zooKeeperFloor(client),
          "k",
          true,
        ),
      ],
      CONFIG,
    );
    await locker.close();
    const contender = {
      id: "zookeeper",
      label: "ZooKeeperLocker, a client (session) each",
      async open() {
        const own = await connected(ensemble);
        clients.push(own);
        const ownLocker = new ZooKeeperLocker(own);
        return { lock: (key) => ownLocker.lock(undefined, key), close: () => ownLocker.close() };
      },
    };
    const contended = withShareOfLimit(
      await measureStoreContention([contender], "contended", (line) => log(`zookeeper: ${line}`)),
      uncontended[0].p50Us / 1000,
    );
    const version = /version: ([^\s,-]+)/i.exec(await fourLetterWord(ensemble.members[0].clientPort, "srvr"))?.[1];
    return { store: `ZooKeeper ${version ?? "(version unknown)"}, one node`, config: CONFIG, uncontended, contended };
  } finally {
    for (const client of clients) client.close();
    await ensemble.stop();
  }
}

/** The scenario's Markdown section. */
export function renderZooKeeper(results) {
  return renderStoreSection("14. ZooKeeper", results);
}
