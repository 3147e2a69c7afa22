/**
 * Everything one run of one scenario owns: a referee redis-server (never faulted), the lock
 * redis-server(s) (faulted by the scenario), admin connections, and the worker processes. It builds
 * worker configurations, runs the end-of-run checks every scenario shares, and tears everything
 * down — workers, connections, servers — whatever happened.
 *
 * With TORTURE_EVENTS_DIR set, every worker event of the run is written there as JSON at teardown
 * (`<scenario>-<seed>.json`), to study a failure; with TORTURE_VERBOSE set, scenarios log their
 * phases to stderr.
 */

import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FileLocker } from "globallock";
import { checkNoStaleAccepted } from "./checks.mjs";
import { pidAlive } from "./cleanup.mjs";
import { ms, now, sleep } from "./clock.mjs";
import { EtcdStore } from "./etcd-store.mjs";
import { RESERVATION } from "./lock-monitor.mjs";
import { deriveSeed } from "./prng.mjs";
import { startServers } from "./redis-server.mjs";
import { RefereeReader } from "./referee.mjs";
import { WorkerPool } from "./worker-pool.mjs";

/**
 * The holder's token in a Redis lock key's value: the value without the waiters' mark, the "+" a
 * locker that joins the key's queue appends (see src/redis/scripts.ts): it changes the value, not
 * the holder. `null` stays `null`.
 */
export function holderToken(value) {
  return typeof value === "string" && value.endsWith("+") ? value.slice(0, -1) : value;
}

export class RunContext {
  /** @type {import("../../support/redis-server.mjs").RedisServer | undefined} */
  refereeServer;
  /** @type {import("../../support/redis-server.mjs").RedisServer[]} */
  lockServers = [];
  /** One admin connection per lock server (they reconnect after restarts). */
  lockAdmins = [];
  pool = new WorkerPool();
  #refereeClient;
  #closers = [];
  /** Servers a scenario started itself (e.g. a Sentinel group): stopped and checked at teardown. */
  #adopted = [];
  /** The lock directory of FileLocker workers (see {@link useFileStore}), if any. */
  fileDirectory = undefined;
  #fileNames;
  /** The etcd cluster of EtcdLocker workers (see {@link useEtcdStore}), if any. */
  etcd = undefined;

  /**
   * @param {{ scenario: string, seed: number, lockNodes: number }} options
   */
  constructor({ scenario, seed, lockNodes }) {
    this.scenario = scenario;
    this.seed = seed;
    this.lockNodes = lockNodes;
    this.namespace = `torture:${scenario}:${seed}:`;
    this.prefix = `torture-lock:${scenario}:`;
  }

  /** Starts the referee and the lock servers. */
  async start() {
    // Every server also listens on a Unix socket in its directory (`socketPath`): the way in for
    // workers inside network namespaces, which do not share this loopback.
    const servers = await startServers(1 + this.lockNodes, {
      config: ({ dir }) => `unixsocket ${join(dir, "redis.sock")}\nunixsocketperm 700\n`,
    });
    [this.refereeServer, ...this.lockServers] = servers;
    this.#refereeClient = this.refereeServer.client();
    this.referee = new RefereeReader(this.#refereeClient, this.namespace);
    this.lockAdmins = this.lockServers.map((server) => server.client());
    this.log(
      `referee on ${this.refereeServer.port}, lock servers on ${this.lockServers.map((s) => s.port).join(", ")}`,
    );
  }

  /**
   * Gives the run a fresh lock directory for FileLocker workers (mode "file"), removed at teardown:
   * their lock files there are what "no lock key left" and {@link holdersValue} look at.
   */
  useFileStore() {
    this.fileDirectory = mkdtempSync(join(tmpdir(), `globallock-torture-${this.scenario}-`));
    const directory = this.fileDirectory;
    // Never locks: it names the lock files (`lockPath`), as every worker's locker does.
    this.#fileNames = new FileLocker({ directory });
    this.onTeardown(() => rmSync(directory, { recursive: true, force: true }));
    return directory;
  }

  /**
   * Gives the run a real etcd cluster of `members` for EtcdLocker workers (mode "etcd"), stopped at
   * teardown and counted by "no process left running": its keys under the run's prefix are what
   * "no lock key left" and {@link holdersValue} look at. Resolves with the {@link EtcdStore}.
   */
  async useEtcdStore(members) {
    const store = await EtcdStore.start(members, this.prefix);
    this.etcd = store;
    this.#adopted.push(store);
    this.log(`etcd members on ${store.endpoints.join(", ")}`);
    return store;
  }

  /** The path of `key`'s lock in the file store (see {@link useFileStore}). */
  fileLockPath(key) {
    return this.#fileNames.lockPath(key);
  }

  /**
   * The entry of `key`'s lock in the file store, `{ name, token, deadline }` (deadline: epoch ms),
   * or null when free. `lockPath` comes from a FileLocker (`locker.lockPath(key)`).
   */
  fileEntry(lockPath) {
    let names;
    try {
      names = readdirSync(lockPath);
    } catch {
      return null;
    }
    const entries = names
      // token.deadline(monotonic ms).deadline(wall-clock ms).…: the wall-clock one.
      .map((name) => /^([0-9a-f]{32})\.(\d+)\.(\d+)\./.exec(name))
      .filter(Boolean)
      .map(([name, token, _monotonic, deadline]) => ({ name, token, deadline: Number(deadline) }));
    return entries.sort((a, b) => b.deadline - a.deadline)[0] ?? null;
  }

  /** With TORTURE_VERBOSE set, prints a timestamped progress line to stderr. */
  log(message) {
    if (process.env.TORTURE_VERBOSE) {
      process.stderr.write(`[${new Date().toISOString()}] ${this.scenario}#${this.seed}: ${message}\n`);
    }
  }

  /** Registers something to close at teardown (a monitor connection, a sampler, a proxy). */
  onTeardown(close) {
    this.#closers.push(close);
  }

  /**
   * Servers the scenario started itself (a Sentinel group's master, replicas and Sentinels): they
   * are stopped at teardown, after the closers, and counted by "no process left running".
   * @param {import("../../support/redis-server.mjs").RedisServer[]} servers
   */
  adoptServers(servers) {
    this.#adopted.push(...servers);
  }

  /**
   * Configuration of worker `index` (see worker.mjs), from the scenario's parameters.
   * @param {number} index
   * @param {object} settings mode, keys, sections, tasks, hold, fencing, expiry, backoffMax, writer,
   *   operationTimeout, and optionally `lockPorts` (where the lock connections go instead of the
   *   lock servers, e.g. a proxy), `lockHost` (their host, default 127.0.0.1), `netns` (the network
   *   namespace the worker runs in; it then reaches the referee through its Unix socket), `sentinel` ({ ports, name }), `abortWaits` ({ chance, minMs, maxMs }),
   *   and for counted locks `limit` and `weights` ({ min, max }) (mode "semaphore") or `writerShare`
   *   (mode "rw")
   */
  workerConfig(index, settings) {
    const lockerOptions = { expiry: settings.expiry, backoff: { min: 20, max: settings.backoffMax } };
    if (settings.operationTimeout !== undefined) lockerOptions.operationTimeout = settings.operationTimeout;
    return {
      id: `w${index}`,
      index,
      seed: deriveSeed(this.seed, `worker ${index}`),
      mode: settings.mode ?? "redis",
      writer: settings.writer ?? "fenced",
      refereePort: this.refereeServer.port,
      refereePath: settings.netns ? join(this.refereeServer.dir, "redis.sock") : null,
      netns: settings.netns ?? null,
      lockHost: settings.lockHost ?? "127.0.0.1",
      lockPorts: settings.lockPorts ?? this.lockServers.map((server) => server.port),
      sentinel: settings.sentinel ?? null,
      abortWaits: settings.abortWaits ?? null,
      namespace: this.namespace,
      prefix: this.prefix,
      keys: settings.keys,
      tasks: settings.tasks ?? 1,
      sections: settings.sections ?? null,
      hold: settings.hold,
      fencing: settings.fencing ?? this.lockNodes === 1,
      lockerOptions,
      acquireTimeoutMs: settings.acquireTimeoutMs ?? 30_000,
      errorRetryMs: settings.errorRetryMs ?? 100,
      limit: settings.limit ?? null,
      weights: settings.weights ?? null,
      writerShare: settings.writerShare ?? 0,
      directory: settings.directory ?? this.fileDirectory ?? null,
      etcdEndpoints: settings.etcdEndpoints ?? this.etcd?.endpoints ?? null,
    };
  }

  /** Starts `count` workers with the same settings and waits until all are ready (not yet going). */
  async startWorkers(count, settings) {
    await this.pool.start(Array.from({ length: count }, (_, i) => this.workerConfig(i, settings)));
    return this.pool.workers;
  }

  /**
   * Starts `count` workers on `keys` with the profile's hold, expiry and backoff (plus `extra`
   * settings), lets them go, and resolves with the workers once `p.warmup` sections are done.
   */
  async startWarmedUp(count, keys, p, extra = {}) {
    const workers = await this.startWorkers(count, {
      keys,
      hold: p.hold,
      expiry: p.expiry,
      backoffMax: p.backoffMax,
      ...extra,
    });
    this.pool.go();
    await this.sectionsAfter(0, p.warmup, 20_000, "warm-up");
    return workers;
  }

  /** Resolves with the first event (already received or future) of any worker that matches. */
  firstEvent(predicate, timeoutMs, label) {
    const earlier = this.pool.events.find(predicate);
    if (earlier !== undefined) return Promise.resolve(earlier);
    return this.pool.waitForEvent(predicate, timeoutMs, label);
  }

  /** Resolves once `n` sections have been completed (per "released" events) after time `since`. */
  async sectionsAfter(since, n, timeoutMs, label = `${n} sections`) {
    const done = () => this.pool.events.filter((e) => e.type === "released" && e.t > since).length;
    if (done() >= n) return;
    await this.pool.waitForEvent(() => done() >= n, timeoutMs, label);
  }

  /**
   * Keys of this run's locks on the running lock servers — the lock keys and any companion key
   * whose name contains the prefix (e.g. a grant queue `{prefix…}:queue`), but not the fencing
   * counters (`…:fence`), which intentionally outlive the locks: [{ node, key, value, pttl }].
   */
  async lockKeys() {
    const found = [];
    for (const [node, server] of this.lockServers.entries()) {
      if (!server.running) continue;
      const admin = this.lockAdmins[node];
      const keys = await admin.keys(`*${this.prefix}*`);
      for (const key of keys) {
        if (key.endsWith(":fence")) continue;
        const [[, type], [, pttl]] = await admin.multi().type(key).pttl(key).exec();
        const value = type === "string" ? await admin.get(key) : `(${type})`;
        found.push({ node, key, value, pttl });
      }
    }
    return found;
  }

  /** "node 0 key=value (ttl ms)" for reports. */
  static describeKeys(keys) {
    return keys.map((k) => `node ${k.node} ${k.key}=${k.value} (TTL ${k.pttl} ms)`).join(", ");
  }

  /**
   * The token holding `key`'s lock on lock server `node` (null when absent), without the waiters'
   * mark: a locker that joins the key's queue appends "+" to the holder's token (see
   * src/redis/scripts.ts), which changes the value but not the holder.
   */
  async lockValue(key, node = 0) {
    return holderToken(await this.lockAdmins[node].get(`${this.prefix}${key}`));
  }

  /**
   * Who holds `key` on lock server `node`, whatever the kind of lock: a lock's token, or a counted
   * lock's holders (its sorted set's members, comma-separated); null when nobody does.
   */
  async holdersValue(key, node = 0) {
    if (this.fileDirectory !== undefined) return this.fileEntry(this.fileLockPath(key))?.token ?? null;
    if (this.etcd !== undefined) return this.etcd.holdersValue(key);
    const admin = this.lockAdmins[node];
    const lockKey = `${this.prefix}${key}`;
    if ((await admin.type(lockKey)) !== "zset") return holderToken(await admin.get(lockKey));
    // Members starting with ":" are the queue's marks (src/redis/permit-scripts.ts), not holders.
    const members = (await admin.zrange(lockKey, 0, -1)).filter((member) => !member.startsWith(":"));
    return members.length === 0 ? null : members.sort().join(",");
  }

  /**
   * The end of every run: stops the workers (gracefully; a worker that does not exit on its own is
   * a failure), then checks what every scenario requires — no unhandled rejection, no unexpected
   * error, nobody left inside on the referee, no lock key left behind, C3 — and returns the
   * referee's history for the scenario's own checks.
   * @param {import("./checks.mjs").Checks} checks
   * @param {string[]} keys the lock keys the run used
   */
  async finish(checks, keys) {
    const forced = await this.pool.stop();
    checks.add(
      "workers exit on their own after stop",
      forced.length === 0,
      "none killed",
      forced.join(", ") || "none killed",
    );
    const badExits = [];
    for (const worker of this.pool.workers) {
      if (worker.killedOnPurpose || forced.includes(worker.id)) continue;
      const { code, signal } = await worker.exited;
      if (code !== 0) badExits.push(`${worker.id}: code ${code} signal ${signal} ${worker.stderr.slice(-300)}`);
    }
    checks.add("workers exit with status 0", badExits.length === 0, "all 0", badExits.join("; ") || "all 0");
    const unhandled = this.pool.events.filter((e) => e.type === "unhandled");
    checks.add(
      "no unhandled rejection or exception in workers",
      unhandled.length === 0,
      "0",
      unhandled.length === 0 ? "0" : `${unhandled.length}: ${unhandled[0].message.slice(0, 300)}`,
    );
    const unexpected = this.pool.events.filter((e) => e.type === "unexpected");
    checks.add(
      "no unexpected error in workers",
      unexpected.length === 0,
      "0",
      unexpected.length === 0 ? "0" : `${unexpected.length}: ${unexpected[0].where}: ${unexpected[0].message}`,
    );
    await this.#checkLeftovers(checks);
    const history = await this.referee.history(keys);
    checks.add(
      "referee: nobody left inside",
      Object.keys(history.stillInside).length === 0,
      "nobody",
      JSON.stringify(history.stillInside),
    );
    if (this.pool.workers[0]?.config.writer !== "unfenced") checkNoStaleAccepted(checks, history);
    return history;
  }

  /**
   * No lock may outlive its workers. A key that still holds a token is a leak (a grant to a waiter
   * that left is handed over by its leave). A queue companion key, or a `reserved:<waiter>` value
   * of builds before the direct grant, may be left by a release that raced a waiter's departure: it
   * must lapse by itself (it has a short TTL), which is checked by waiting for it.
   */
  async #checkLeftovers(checks) {
    if (this.fileDirectory !== undefined) {
      // Lock directories with an entry, or attempts not cleaned up; fencing counters stay on purpose.
      const left = readdirSync(this.fileDirectory).filter(
        (name) =>
          name.startsWith(".tmp-") ||
          (name.endsWith(".lock") && readdirSync(join(this.fileDirectory, name)).length > 0),
      );
      checks.add("no lock key left after every worker exited", left.length === 0, "none", left.join(", ") || "none");
      return;
    }
    if (this.etcd !== undefined) {
      // Every worker released and closed: no holder entry of any key may be left in etcd.
      const left = await this.etcd.leftovers();
      const shown = left.map((entry) => `${entry.key}=${entry.value}`).join(", ");
      checks.add("no lock key left after every worker exited", left.length === 0, "none", shown || "none");
      return;
    }
    const left = await this.lockKeys();
    const lapsing = left.filter((k) => k.value?.startsWith(RESERVATION) || !k.key.startsWith(this.prefix));
    const leaked = left.filter((k) => !lapsing.includes(k));
    checks.add(
      "no lock key left after every worker exited",
      leaked.length === 0,
      "none",
      leaked.length === 0
        ? `none${lapsing.length > 0 ? ` (${lapsing.length} reservation/queue key left to lapse)` : ""}`
        : RunContext.describeKeys(leaked),
    );
    if (lapsing.length === 0) return;
    const wait = Math.max(...lapsing.map((k) => k.pttl));
    if (wait > 0 && wait <= 10_000) await sleep(wait + 50);
    const still = (await this.lockKeys()).filter((k) => lapsing.some((l) => l.node === k.node && l.key === k.key));
    checks.add(
      "reservations and queue keys lapse on their own",
      still.length === 0,
      "gone after their TTL",
      still.length === 0 ? `gone after ≤ ${wait} ms` : RunContext.describeKeys(still),
    );
  }

  /**
   * Stops everything, whatever state it is in, and checks that no process it started survives.
   * @param {import("./checks.mjs").Checks} checks
   */
  async teardown(checks) {
    await this.pool.kill();
    const dumpDir = process.env.TORTURE_EVENTS_DIR;
    if (dumpDir) {
      mkdirSync(dumpDir, { recursive: true });
      const file = join(dumpDir, `${this.scenario}-${this.seed}.json`);
      writeFileSync(file, `${JSON.stringify(this.pool.events, null, 1)}\n`);
    }
    for (const close of this.#closers.splice(0)) {
      try {
        await close();
      } catch {
        // best effort
      }
    }
    this.#refereeClient?.disconnect();
    for (const admin of this.lockAdmins) admin.disconnect();
    const servers = [this.refereeServer, ...this.lockServers, ...this.#adopted].filter(Boolean);
    await Promise.allSettled(servers.map((server) => server.stop()));
    const pids = [...this.pool.workers.map((w) => w.pid), ...servers.flatMap((s) => s.pids)];
    let alive = pids.filter(pidAlive);
    for (let i = 0; i < 20 && alive.length > 0; i++) {
      await sleep(25);
      alive = alive.filter(pidAlive);
    }
    checks.add("no process left running", alive.length === 0, "none", alive.length === 0 ? "none" : alive.join(", "));
  }
}

/**
 * The lease keepers' statistics of every worker that reported them (in its "done" stats), summed:
 * extensions, batches and retries added up, the least headroom and the worst timer lateness.
 * @param {import("./worker-pool.mjs").WorkerHandle[]} workers
 */
export function leaseStatsOf(workers) {
  const all = workers.map((w) => w.stats?.leaseStats).filter(Boolean);
  return {
    reported: all.length,
    extensions: all.reduce((n, s) => n + s.extensions, 0),
    batches: all.reduce((n, s) => n + s.batches, 0),
    retries: all.reduce((n, s) => n + s.retries, 0),
    minHeadroomMs: Math.min(...all.map((s) => s.minHeadroomMs)),
    maxLatenessMs: Math.max(0, ...all.map((s) => s.maxLatenessMs)),
  };
}

/** Events of type `type` from `events` (newest last) with `t` after `since`. */
export function eventsAfter(events, type, since) {
  return events.filter((e) => e.type === type && e.t > since);
}

/** A duration in ms for a report, e.g. "812 ms". */
export function fmt(value) {
  return `${ms(value)} ms`;
}

export { now };
