import type { Redis } from "ioredis";
import { type Locker, RedisLocker, type RedisLockerOptions } from "../../src/index.js";
import type { LockerHarness } from "../contracts/contract.js";
import { type RedisServer, startServers, stopServers } from "./redis.js";

/** Lockers on `servers`, each with its own client per server (like separate processes). */
export class RedisFixture {
  readonly servers: RedisServer[];
  readonly clients: Redis[] = [];
  readonly lockers: RedisLocker[] = [];

  constructor(servers: RedisServer[]) {
    this.servers = servers;
  }

  static async start(nodes: number): Promise<RedisFixture> {
    return new RedisFixture(await startServers(nodes));
  }

  /** One new client per server. */
  connect(): Redis[] {
    const clients = this.servers.map((server) => server.client());
    this.clients.push(...clients);
    return clients;
  }

  /** A new client to the first server, for inspecting keys. */
  admin(index = 0): Redis {
    const server = this.servers[index];
    if (server === undefined) throw new Error(`no server #${index}`);
    const client = server.client();
    this.clients.push(client);
    return client;
  }

  /** A new locker on new connections. */
  locker(options?: RedisLockerOptions): RedisLocker {
    const clients = this.connect();
    const locker = new RedisLocker(clients.length === 1 ? (clients[0] as Redis) : clients, options);
    this.lockers.push(locker);
    return locker;
  }

  /** Closes lockers, then clients, then stops the servers. */
  async stop(): Promise<void> {
    await Promise.allSettled(this.lockers.map((locker) => locker.close()));
    for (const client of this.clients) client.disconnect();
    await stopServers(this.servers);
  }

  /** The contract harness for these servers. */
  harness(base: RedisLockerOptions = {}): LockerHarness {
    const withOptions = (options?: { wakeOnly?: boolean }): RedisLockerOptions =>
      options?.wakeOnly ? { ...base, backoff: { min: 20_000, max: 20_000 } } : base;
    return {
      create: async (options) => this.locker(withOptions(options)),
      peer: async (_locker: Locker, options) => this.locker(withOptions(options)),
      fencing: this.servers.length === 1,
      handOff: true,
      cleanup: () => this.stop(),
    };
  }
}
