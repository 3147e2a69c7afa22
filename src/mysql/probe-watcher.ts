import type { ReleaseWatcher } from "../backend.js";
import { withTimeout } from "../internal/sleep.js";
import type { ClosingHost } from "../sql/watcher-host.js";
import { lockName } from "./keys.js";
import { checkOut, isStatementError } from "./session.js";
import type { MySqlPool, MySqlPoolConnection } from "./types.js";

/** How long one probe's `GET_LOCK` on the key waits before it asks again, in seconds. */
const PROBE_WAIT_S = 30;

/**
 * How long a probe's `GET_LOCK` on the waiting room waits before it asks again, in seconds: long,
 * as asking again puts it at the back of the line (it is cancelled with `KILL QUERY` anyway).
 */
const ROOM_WAIT_S = 3600;

/**
 * How long a probe that woke its waiters waits to hear how their try went before it looks at the
 * key again, in ms: a safety net (a try that was never made, or whose outcome never came back).
 */
const VERDICT_WAIT_MS = 2000;

/** The `GET_LOCK` name of the waiting room of the key whose lock name is `name` (see {@link ProbeWatcher}). */
export function roomName(name: string): string {
  // "." is not a base64url character: no key's lock name is ever a room's.
  return `${name}.q`;
}

/** What a head probe that woke its waiters hears of their try (see {@link ProbeWatcher}). */
type Verdict = "retry" | "acquired" | "cancelled" | "no answer";

/** What a {@link ProbeWatcher} needs of its backend. */
export interface ProbeWatcherHost extends ClosingHost {
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
  /**
   * The `GET_LOCK` name a probe of `resource` waits for, asked again before each wait (default: the
   * key's lock name). A probe whose name changed leaves the waiting room of the old one first.
   */
  probeName?(resource: string): string;
}

/** One key's probe: a pool connection waiting in the key's waiting room, then for the key itself. */
interface Probe {
  readonly resource: string;
  connection: MySqlPoolConnection | undefined;
  /** True while a `GET_LOCK` (of the room or of the key) is on the wire (a KILL QUERY ends it). */
  blocking: boolean;
  /** True while it holds the room: it waits for the key itself, for its locker. */
  head: boolean;
  cancelled: boolean;
  /** Settles when the probe has given its connection back. */
  done: Promise<void>;
  /** The `KILL QUERY` in flight, awaited before the connection goes back to the pool. */
  killing: Promise<unknown>;
  /** Set while it waits for the outcome of the try its wake-up caused. */
  verdict: ((verdict: Verdict) => void) | undefined;
}

/**
 * How a MySQL locker hears releases made by other connections (MySQL has no LISTEN/NOTIFY),
 * without letting its probes take the key from the lockers that want it.
 *
 * While a locker waits for a key held elsewhere, one probe connection from the pool queues for the
 * key's *waiting room* (`GET_LOCK` of {@link roomName}: the server grants it in arrival order, so
 * the room is a queue across lockers and processes). The probe that holds the room is the key's
 * head: it blocks in `GET_LOCK(name, 30)` on the key itself, which the server grants the moment the
 * holder lets go (or at once if the key was freed before the statement ran, so no release slips
 * by). It gives the key straight back (`RELEASE_LOCK`) and wakes the key's waiters here, which try
 * on the lock connection; then it waits to hear how that went. Held elsewhere again (someone
 * outside the queue was first): it waits for the key again, keeping the room. Taken: it leaves the
 * room, so the next locker in line becomes the head, and queues again at the back while waiters
 * here still wait. Only the head ever holds the key, for one round trip: probes that all waited for
 * the key itself passed it from one to the next through the server's queue, and the lockers'
 * tries, finding it held by a probe each time, almost never got it (eight lockers on one key made
 * no progress at all).
 *
 * A probe is cancelled with `KILL QUERY` when nobody here waits any more; it leaves the room, and
 * its connection goes back to the pool only with no lock on it (else it is destroyed). A key held
 * by this locker's own connection is not probed: its release is local and wakes the waiters here
 * directly. At most `limit` probes run at once; keys beyond that are not heard, and their waiters
 * poll.
 */
export class ProbeWatcher implements ReleaseWatcher {
  readonly #host: ProbeWatcherHost;
  /** Watchers per resource. */
  readonly #watchers = new Map<string, number>();
  /** The running probe per resource. */
  readonly #probes = new Map<string, Probe>();
  /**
   * Per resource, the probes cancelled and not yet finished: until then one may hold the key for a
   * moment (a `KILL QUERY` is answered before the server has woken the statement it ends, so a
   * release just after it can still grant the probe the key).
   */
  readonly #stopping = new Map<string, Promise<void>>();

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

  /** True while the key's head probe blocks on the key itself (a release cannot slip by unheard). */
  isWatching(resource: string): boolean {
    const probe = this.#probes.get(resource);
    return probe?.head === true && probe.blocking;
  }

  close(): Promise<void> {
    return this.#host.close();
  }

  /**
   * Settles once no cancelled probe of `resource` can hold the key any more; `undefined` when none
   * is stopping. An attempt waits for it, so that the locker's own probe never makes it miss (a
   * `tryLock` right after the last waiter here gave up).
   */
  stopping(resource: string): Promise<void> | undefined {
    return this.#stopping.size === 0 ? undefined : this.#stopping.get(resource);
  }

  /** A try on the lock connection found `resource` held elsewhere: probe it if it is waited for. */
  heldElsewhere(resource: string): void {
    if (!this.#watchers.has(resource)) return;
    const probe = this.#probes.get(resource);
    if (probe === undefined) void this.#arm(resource);
    else probe.verdict?.("retry");
  }

  /** A try on the lock connection took `resource`: its head probe leaves the room. */
  acquiredHere(resource: string): void {
    this.#probes.get(resource)?.verdict?.("acquired");
  }

  /**
   * The name `resource`'s probe waits for changed (see `ProbeWatcherHost.probeName`): a probe that
   * waits in the old name's line is cancelled, and a new one starts while the key is still waited
   * for.
   */
  renamed(resource: string): void {
    const probe = this.#probes.get(resource);
    if (probe === undefined) return;
    void this.#cancel(probe).then(() => {
      if (this.#watchers.has(resource) && !this.#probes.has(resource)) void this.#arm(resource);
    });
  }

  /** Cancels every probe and resolves once each has given its connection back. */
  async stop(): Promise<void> {
    const probes = [...this.#probes.values()];
    await Promise.all(probes.map((probe) => this.#cancel(probe)));
  }

  /** Starts a probe on `resource` unless one runs; resolves once its first `GET_LOCK` is sent. Never rejects. */
  #arm(resource: string): Promise<void> {
    if (this.#probes.has(resource) || this.#host.closing() || this.#probes.size >= this.#host.limit) {
      return Promise.resolve();
    }
    const probe: Probe = {
      resource,
      connection: undefined,
      blocking: false,
      head: false,
      cancelled: false,
      done: Promise.resolve(),
      killing: Promise.resolve(),
      verdict: undefined,
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
    const nameOf = (): string => this.#host.probeName?.(probe.resource) ?? lockName(probe.resource);
    let name = nameOf();
    let room = roomName(name);
    /** The connection holds no lock (a probe holding the room, or granted the key, is not clean). */
    let clean = true;
    const stopped = (): boolean => probe.cancelled || this.#host.closing();
    const leaveRoom = async (): Promise<void> => {
      probe.head = false;
      await connection.query("DO RELEASE_LOCK(?)", [room]);
      clean = true;
    };
    try {
      while (!stopped()) {
        const next = nameOf();
        if (next !== name) {
          if (probe.head) await leaveRoom();
          name = next;
          room = roomName(next);
        }
        if (!probe.head) {
          // In line: the server grants the room in arrival order.
          if ((await this.#getLock(probe, connection, room, ROOM_WAIT_S, sent)) !== 1) continue; // timed out, or killed
          clean = false;
          probe.head = true;
          continue;
        }
        if ((await this.#getLock(probe, connection, name, PROBE_WAIT_S, sent)) !== 1) continue;
        await connection.query("DO RELEASE_LOCK(?)", [name]);
        if (stopped()) break;
        const verdict = await this.#wake(probe);
        if (verdict !== "acquired") continue; // held elsewhere again (or no answer): wait for the key again
        // Taken here: the next locker in line becomes the head; queue again at the back.
        await leaveRoom();
      }
      if (probe.head) await leaveRoom();
    } catch (error) {
      // A killed statement may have left a lock here, or the connection failed.
      clean = false;
      if (isStatementError(error)) {
        // Killed (the connection lives): give back whatever it may hold, so that the key is free
        // once the probe is done (a destroyed connection's locks are freed only once the server
        // notices it is gone).
        await probe.killing;
        const given = connection.query("DO RELEASE_LOCK(?), RELEASE_LOCK(?)", [room, name]);
        const timedOut = () => new Error("no answer");
        clean = await withTimeout(given, this.#host.connectTimeout, timedOut).then(
          () => true,
          () => false,
        );
      }
    } finally {
      probe.head = false;
      // A late KILL QUERY must not reach the pool's next user of this connection.
      await probe.killing;
      connection.connection.removeListener("error", ignore);
      if (clean) connection.release();
      else connection.destroy();
    }
  }

  /**
   * `GET_LOCK(lock, waitS)` on the probe's connection: 1 granted, 0 timed out, null killed. Calls
   * `sent` once the statement is on its way.
   */
  async #getLock(
    probe: Probe,
    connection: MySqlPoolConnection,
    lock: string,
    waitS: number,
    sent: () => void,
  ): Promise<unknown> {
    probe.blocking = true;
    try {
      const granted = connection.query("SELECT GET_LOCK(?, ?) AS ok", [lock, waitS]);
      sent();
      const [rows] = await granted;
      return (rows as Array<{ ok: unknown }>)[0]?.ok;
    } finally {
      probe.blocking = false;
    }
  }

  /** Wakes the key's waiters here and waits to hear how their try went (see {@link Verdict}). */
  #wake(probe: Probe): Promise<Verdict> {
    return new Promise<Verdict>((resolve) => {
      const timer = setTimeout(() => settle("no answer"), VERDICT_WAIT_MS);
      timer.unref();
      const settle = (verdict: Verdict): void => {
        clearTimeout(timer);
        probe.verdict = undefined;
        resolve(verdict);
      };
      probe.verdict = settle;
      this.#host.released(probe.resource);
    });
  }

  /** Cancels `probe` (`KILL QUERY` while it blocks; destroys its connection if that fails). */
  async #cancel(probe: Probe): Promise<void> {
    if (this.#probes.get(probe.resource) === probe) this.#probes.delete(probe.resource);
    if (probe.cancelled) return probe.done;
    probe.cancelled = true;
    const { resource, done } = probe;
    const stopping = Promise.all([this.#stopping.get(resource), done]).then(() => undefined);
    this.#stopping.set(resource, stopping);
    void stopping.then(() => {
      if (this.#stopping.get(resource) === stopping) this.#stopping.delete(resource);
    });
    probe.verdict?.("cancelled");
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
