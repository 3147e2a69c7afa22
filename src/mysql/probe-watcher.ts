import type { ReleaseWatcher } from "../core/backend.js";
import { lockName } from "./keys.js";
import { checkOut } from "./session.js";
import type { MySqlPool, MySqlPoolConnection } from "./types.js";

/** How long one probe's `GET_LOCK` waits before it asks again, in seconds. */
const PROBE_WAIT_S = 30;

/** What a {@link ProbeWatcher} needs of its backend. */
export interface ProbeWatcherHost {
  readonly pool: MySqlPool;
  /** How long to wait for a pool connection, in ms. */
  readonly connectTimeout: number;
  /** The most probes at once. */
  readonly limit: number;
  /** True while the locker's own lock connection holds or tries `resource` (nothing to hear). */
  heldHere(resource: string): boolean;
  /** `resource` was free a moment ago: wake its waiters here. */
  released(resource: string): void;
  /** Cancels the statement running on connection `id` (`KILL QUERY`); false when it could not. */
  cancel(id: number): Promise<boolean>;
  /** True once the locker closes: no new probe starts. */
  closing(): boolean;
  /** The backend's own close (see `ReleaseWatcher.close`). */
  close(): Promise<void>;
}

/** One key's probe: a pool connection blocked in `GET_LOCK` on the key while another holds it. */
interface Probe {
  readonly resource: string;
  connection: MySqlPoolConnection | undefined;
  /** True while its `GET_LOCK` is on the wire (a release then wakes it). */
  blocking: boolean;
  cancelled: boolean;
  /** Settles when the probe has given its connection back. */
  done: Promise<void>;
  /** The `KILL QUERY` in flight, awaited before the connection goes back to the pool. */
  killing: Promise<unknown>;
}

/**
 * How a MySQL locker hears releases made by other connections (MySQL has no LISTEN/NOTIFY):
 * while it waits for a key held elsewhere, a probe connection from the pool blocks in
 * `GET_LOCK(name, 30)`; the server grants it the moment the holder lets go (or at once if the
 * key was freed before the probe's statement ran, so no release slips by). The probe gives the
 * lock straight back (`RELEASE_LOCK`) and wakes the key's waiters here, which try on the lock
 * connection; it is armed again only when such a try finds the key held elsewhere. A probe is
 * cancelled with `KILL QUERY` when nobody here waits any more, and its connection goes back to
 * the pool only with no lock on it (else it is destroyed). A key held by this locker's own
 * connection is not probed: its release is local and wakes the waiters here directly.
 * At most `limit` probes run at once; keys beyond that are not heard, and their waiters poll.
 */
export class ProbeWatcher implements ReleaseWatcher {
  readonly #host: ProbeWatcherHost;
  /** Watchers per resource. */
  readonly #watchers = new Map<string, number>();
  /** The running probe per resource. */
  readonly #probes = new Map<string, Probe>();

  constructor(host: ProbeWatcherHost) {
    this.#host = host;
  }

  watch(resource: string): Promise<void> {
    this.#watchers.set(resource, (this.#watchers.get(resource) ?? 0) + 1);
    return this.#host.heldHere(resource) ? Promise.resolve() : this.#arm(resource);
  }

  unwatch(resource: string): void {
    const count = (this.#watchers.get(resource) ?? 1) - 1;
    if (count > 0) {
      this.#watchers.set(resource, count);
      return;
    }
    this.#watchers.delete(resource);
    const probe = this.#probes.get(resource);
    if (probe !== undefined) void this.#cancel(probe);
  }

  isWatching(resource: string): boolean {
    return this.#probes.get(resource)?.blocking === true;
  }

  close(): Promise<void> {
    return this.#host.close();
  }

  /** A try on the lock connection found `resource` held elsewhere: probe it if it is waited for. */
  heldElsewhere(resource: string): void {
    if (this.#watchers.has(resource)) void this.#arm(resource);
  }

  /** Cancels every probe and resolves once each has given its connection back. */
  async stop(): Promise<void> {
    const probes = [...this.#probes.values()];
    await Promise.all(probes.map((probe) => this.#cancel(probe)));
  }

  /** Starts a probe on `resource` unless one runs; resolves once its `GET_LOCK` is sent. Never rejects. */
  #arm(resource: string): Promise<void> {
    if (this.#probes.has(resource) || this.#host.closing() || this.#probes.size >= this.#host.limit) {
      return Promise.resolve();
    }
    const probe: Probe = {
      resource,
      connection: undefined,
      blocking: false,
      cancelled: false,
      done: Promise.resolve(),
      killing: Promise.resolve(),
    };
    this.#probes.set(resource, probe);
    let sent!: () => void;
    const armed = new Promise<void>((resolve) => {
      sent = resolve;
    });
    probe.done = this.#run(probe, sent).finally(() => {
      sent();
      if (this.#probes.get(resource) === probe) this.#probes.delete(resource);
    });
    return armed;
  }

  async #run(probe: Probe, sent: () => void): Promise<void> {
    let connection: MySqlPoolConnection;
    try {
      connection = await checkOut(this.#host.pool, this.#host.connectTimeout, probe.resource);
    } catch {
      return; // unheard: the core's safety net polls
    }
    probe.connection = connection;
    connection.connection.on("error", ignore);
    const name = lockName(probe.resource);
    /** The connection may hold the key (a probe granted, its RELEASE_LOCK not confirmed). */
    let clean = true;
    try {
      while (!probe.cancelled && !this.#host.closing()) {
        probe.blocking = true;
        const granted = connection.query("SELECT GET_LOCK(?, ?) AS ok", [name, PROBE_WAIT_S]);
        sent();
        let ok: unknown;
        try {
          const [rows] = await granted;
          ok = (rows as Array<{ ok: unknown }>)[0]?.ok;
        } finally {
          probe.blocking = false;
        }
        if (ok !== 1) continue; // timed out (0), or cancelled (NULL)
        clean = false;
        await connection.query("DO RELEASE_LOCK(?)", [name]);
        clean = true;
        if (!probe.cancelled) this.#host.released(probe.resource);
        return;
      }
    } catch {
      // A killed RELEASE_LOCK may have left the lock here, or the connection failed.
      clean = false;
    } finally {
      // A late KILL QUERY must not reach the pool's next user of this connection.
      await probe.killing;
      connection.connection.removeListener("error", ignore);
      if (clean) connection.release();
      else connection.destroy();
    }
  }

  /** Cancels `probe` (`KILL QUERY` while it blocks; destroys its connection if that fails). */
  async #cancel(probe: Probe): Promise<void> {
    if (this.#probes.get(probe.resource) === probe) this.#probes.delete(probe.resource);
    if (probe.cancelled) return probe.done;
    probe.cancelled = true;
    const id = probe.connection?.connection.threadId;
    if (probe.blocking && id !== undefined && id !== null) {
      const connection = probe.connection;
      probe.killing = this.#host.cancel(id).then((cancelled) => {
        if (!cancelled) connection?.destroy();
      });
    }
    return probe.done;
  }
}

function ignore(): void {}
