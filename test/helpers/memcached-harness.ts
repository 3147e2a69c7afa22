import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build } from "esbuild";
import type Memcached from "memcached";
import { MEMCACHED_CLIENT_OPTIONS } from "../../src/memcached/client-options.js";
import { KeyNames } from "../../src/memcached/layout.js";
import { MemcachedLocker } from "../../src/memcached/memcached-locker.js";
import type { MemcachedLockerOptions } from "../../src/memcached/options.js";
import { MemcachedServer, type MemcachedServerOptions } from "../../support/memcached-server.mjs";
import type { LockerHarness } from "../contracts/contract.js";

export { MemcachedServer } from "../../support/memcached-server.mjs";

/** A short lease for the suites (Memcached writes it rounded up to seconds, plus two). */
const EXPIRY = 3000;

/**
 * Lockers on one real Memcached server, each on its own client (as another process would have),
 * made with MEMCACHED_CLIENT_OPTIONS. Lockers of this process hear one another's releases (they
 * share the server); across processes waiters poll.
 */
export class MemcachedFixture {
  readonly server: MemcachedServer;
  readonly clients: Memcached[] = [];
  readonly lockers: MemcachedLocker[] = [];

  constructor(server: MemcachedServer) {
    this.server = server;
  }

  /**
   * Starts a server and marks `prefixes` as having kept their items: a server that starts for the
   * first time is, to a locker, one that lost its items, and it grants nothing for a lease (see
   * RestartGuard); this server, started just now, held no lock before.
   */
  static async start(options?: MemcachedServerOptions, prefixes = ["globallock:"]): Promise<MemcachedFixture> {
    const fixture = new MemcachedFixture(await MemcachedServer.start(options));
    for (const prefix of prefixes) await fixture.markKept(prefix);
    return fixture;
  }

  /** Writes the guard's epoch item of `prefix` (what the first locker of a prefix writes after a lease). */
  async markKept(prefix: string): Promise<void> {
    const { epoch } = new KeyNames(prefix, "");
    await this.server.command(`set ${epoch} 0 0 1\r\n1`);
  }

  /** A new client on the server (ended by `stop`). */
  client(options: Memcached.options = {}): Memcached {
    const client = this.server.client({ ...MEMCACHED_CLIENT_OPTIONS, ...options });
    this.clients.push(client);
    return client;
  }

  /** A new locker on a new client (or on `client`). */
  locker(options?: MemcachedLockerOptions, client: Memcached = this.client()): MemcachedLocker {
    const locker = new MemcachedLocker(client, { expiry: EXPIRY, ...options });
    this.lockers.push(locker);
    return locker;
  }

  /** Closes the lockers, ends the clients, stops the server. */
  async stop(): Promise<void> {
    await Promise.allSettled(this.lockers.map((locker) => locker.close()));
    for (const client of this.clients) client.end();
    await this.server.stop();
  }

  /** The lock contract harness (its cleanup stops the fixture). */
  harness(): LockerHarness {
    const options = (wanted?: { wakeOnly?: boolean }): MemcachedLockerOptions =>
      wanted?.wakeOnly ? { backoff: { min: 20_000, max: 20_000 }, expiry: 60_000 } : {};
    return {
      create: async (wanted) => this.locker(options(wanted)),
      peer: async (_locker, wanted) => this.locker(options(wanted)),
      fencing: false,
      handOff: true,
      cleanup: () => this.stop(),
    };
  }
}

/**
 * Bundles the Memcached locker from the sources into one ES module in a temporary directory, for
 * a child process (it imports only Node's own modules): `path` to import, `remove` when done.
 */
export async function bundledLocker(): Promise<{ path: string; remove(): void }> {
  const dir = mkdtempSync(join(tmpdir(), "globallock-memcached-child-"));
  const path = join(dir, "memcached-locker.mjs");
  await build({
    entryPoints: ["src/memcached/memcached-locker.ts"],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    outfile: path,
    logLevel: "silent",
  });
  return { path, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
