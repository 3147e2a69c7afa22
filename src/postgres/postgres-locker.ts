import { performance } from "node:perf_hooks";
import { InvalidArgumentError, LockerClosedError, LockLostError, StoreUnavailableError } from "../errors.js";
import { abortable } from "../internal/abortable.js";
import { Backoff } from "../internal/backoff.js";
import type { AcquireProbe } from "../internal/diagnostics.js";
import { noopRelease } from "../internal/release-func.js";
import { TracedLocker } from "../internal/traced-locker.js";
import {
  checkWeight,
  resolveAcquireOptions,
  validateKey,
  validateOptionsObject,
  validateSignal,
  validateTimerDelay,
} from "../internal/validate.js";
import { type KeyState, KeyStates, Waiter } from "../internal/waiter.js";
import type { AcquireOptions, Lease, Locker, ReleaseFunc, ReleaseOutcome } from "../locker.js";
import { type Heartbeat, startHeartbeat } from "./heartbeat.js";
import { Hold, type HoldOwner, type Request } from "./hold.js";
import { channelOf, lockId, markerOf } from "./keys.js";
import { type PostgresLockerOptions, type ResolvedPostgresLockerOptions, resolvePostgresOptions } from "./options.js";
import { Session, type SessionEnd } from "./session.js";
import type { PostgresPool, PostgresPoolClient } from "./types.js";

/** What one attempt found. */
interface AttemptRow {
  ok: boolean;
  marked: boolean | null;
  token: string | null;
}

/** The plain attempt: one statement, one lock function, nothing else (the uncontended path). */
const TRY_SQL = "SELECT pg_try_advisory_lock($1::bigint) AS ok, NULL::boolean AS marked, NULL::text AS token";

/**
 * An attempt that may mark the caller as a waiter first (so that a release in between sees it and
 * NOTIFYs), unmarks it on success, and draws a fencing token only when the lock was taken — all in
 * one statement. The CTEs are materialized and chained, so they run in this order, once each.
 */
const ATTEMPT_SQL = `WITH m AS MATERIALIZED (
    SELECT CASE WHEN $4::boolean THEN pg_try_advisory_lock_shared($2::int, $3::int) END AS marked
  ), t AS MATERIALIZED (
    SELECT pg_try_advisory_lock($1::bigint) AS ok FROM m
  )
  SELECT t.ok, m.marked,
    CASE WHEN t.ok AND (m.marked OR $5::boolean) THEN pg_advisory_unlock_shared($2::int, $3::int) END AS unmarked,
    CASE WHEN t.ok AND $6::boolean THEN nextval($7::regclass)::text END AS token
  FROM t, m`;

/**
 * A release: unlocks, then NOTIFYs the key's waiters only if one marked itself (a marker held by
 * another session makes the exclusive try on it fail).
 */
const RELEASE_SQL = `SELECT pg_advisory_unlock($1::bigint) AS released,
  CASE WHEN pg_try_advisory_xact_lock($2::int, $3::int) THEN NULL ELSE pg_notify($4, $5) END AS notified`;

const UNMARK_SQL = "SELECT pg_advisory_unlock_shared($1::int, $2::int)";

/** What `weight` above 1 is refused with. */
const LOCK_LIMIT = "a lock's limit is 1";

/**
 * A {@link Locker} on PostgreSQL session advisory locks, through a `pg.Pool` the caller creates,
 * owns and ends.
 *
 * - **Keys.** A key's lock is `pg_try_advisory_lock(id)` where `id` is the first 64 bits of the
 *   SHA-256 of `prefix + key`. Two keys whose ids collide share one lock: they exclude each other
 *   (never two holders of one key). The odds are about n² / 2⁶⁵ for n keys held at once (10⁻⁸ for
 *   a million), so the locker does not check for it.
 * - **One connection.** The locker checks one connection out of the pool on its first call and
 *   keeps it: it holds every lock the locker takes (many keys on one session), `LISTEN`s for
 *   releases, and is confirmed every `expiry / 2`. A lock lives as long as that session; so a
 *   dropped connection (killed backend, server restart, network failure) loses every lock on it:
 *   each lease's `lost` aborts and `onLockLost` is called, and the next call checks out a new
 *   connection. The session is asked to end after `expiry` idle (`idle_session_timeout`), so a
 *   frozen holder's locks are freed by the server.
 * - **Waiting.** Never a blocking `pg_advisory_lock`: a waiter makes single `pg_try_advisory_lock`
 *   attempts, marks itself as waiting (a shared advisory lock on the same 64 bits as two `int4`),
 *   and wakes on the `NOTIFY` a release sends when it finds a marker, or on a jittered backoff (50
 *   ms to 1 s) as the safety net. In one locker, waiters of a key queue FIFO and only the head asks.
 * - **Fencing.** `acquire(…, { fencing: true })` draws `nextval` of a sequence in the same
 *   statement that took the lock, only when it was taken.
 * - **Close.** `close()` rejects waiters and, once no lease is held, cleans the connection up
 *   (`UNLISTEN *`, no session lock left) and gives it back to the pool. Leases still held keep it
 *   until they are released or, at the latest, `expiry` after `close()`, when it is destroyed.
 * - **Diagnostics** (kind `"postgres-lock"`; see `diagnostics.ts`): every call is traced on
 *   `globallock:acquire` (`attempts`: `pg_try_advisory_lock` statements sent); every release and
 *   lost lease is published; each heartbeat that confirmed the session is one extend message
 *   (`"extended"`) for the auto-extended leases on it, and one that failed is one message whose
 *   outcome is the leases' loss reason, with its error, before their lost messages.
 */
export class PostgresLocker extends TracedLocker implements Locker {
  readonly #pool: PostgresPool;
  readonly #options: ResolvedPostgresLockerOptions;
  readonly #channel: string;
  readonly #closing = new AbortController();
  readonly #keys = new KeyStates();
  #session: Session | undefined;
  #connecting: Promise<Session> | undefined;
  #sequenceReady: Promise<void> | undefined;
  /** Lease lengths of the held auto-extended leases, counted (the heartbeat follows the shortest). */
  readonly #lengths = new Map<number, number>();
  #heartbeat: NodeJS.Timeout | undefined;
  #heartbeatAt = Number.POSITIVE_INFINITY;
  /** The heartbeat in flight while anyone listens for extensions (to publish what it found). */
  #beating: Heartbeat | undefined;
  #waiting = 0;
  #closed: Promise<void> | undefined;
  /** What each {@link Hold} may ask of this locker. */
  readonly #owner: HoldOwner = {
    free: (hold) => this.#free(hold),
    untrack: (hold) => this.#untrack(hold),
    reportLost: (error) => this.#reportLost(error),
    validUntil: (session, length) => this.#sessionValidUntil(session, length),
    diagnostics: this.diagnostics,
  };

  /**
   * @param pool a `pg.Pool` (or anything with its `connect()`), created, owned and ended by the
   *   caller. The locker checks one connection out of it while it runs.
   * @param options see {@link PostgresLockerOptions}.
   */
  constructor(pool: PostgresPool, options?: PostgresLockerOptions) {
    super("postgres-lock");
    if (typeof (pool as { connect?: unknown } | null | undefined)?.connect !== "function") {
      throw new InvalidArgumentError("pool", "a pg Pool (an object with a connect() method)", pool);
    }
    validateOptionsObject("options", options);
    this.#pool = pool;
    this.#options = resolvePostgresOptions(options);
    this.#channel = channelOf(this.#options.prefix);
  }

  /** The resolved options (defaults filled in). */
  get options(): Readonly<Omit<ResolvedPostgresLockerOptions, "onLockLost">> {
    const { onLockLost: _, ...rest } = this.#options;
    return rest;
  }

  /** Number of leases this locker holds now. */
  get heldCount(): number {
    return this.#session?.holds.size ?? 0;
  }

  /** Number of callers waiting in `lock` or `acquire` (after a failed attempt, or queued here). */
  get waitingCount(): number {
    return this.#waiting;
  }

  // The calls themselves (see TracedLocker); `probe` is the diagnostics message while traced.

  /** @internal */
  protected override async lockCall(
    signal: AbortSignal | undefined,
    key: string,
    probe: AcquireProbe | undefined,
  ): Promise<ReleaseFunc> {
    const request = this.#check(signal, key, undefined, undefined);
    return ((await this.#obtain(signal, key, request, true, probe)) as Hold).release;
  }

  /** @internal */
  protected override async tryLockCall(
    signal: AbortSignal | undefined,
    key: string,
    probe: AcquireProbe | undefined,
  ): Promise<[acquired: boolean, release: ReleaseFunc]> {
    const request = this.#check(signal, key, undefined, undefined);
    const hold = await this.#obtain(signal, key, request, false, probe);
    return hold === undefined ? [false, noopRelease()] : [true, hold.release];
  }

  /** @internal */
  protected async acquireCall(
    signal: AbortSignal | undefined,
    key: string,
    options: AcquireOptions | undefined,
    probe: AcquireProbe | undefined,
  ): Promise<Lease> {
    const request = this.#check(signal, key, options, probe);
    return ((await this.#obtain(signal, key, request, true, probe)) as Hold).lease();
  }

  /** @internal */
  protected async tryAcquireCall(
    signal: AbortSignal | undefined,
    key: string,
    options: AcquireOptions | undefined,
    probe: AcquireProbe | undefined,
  ): Promise<Lease | undefined> {
    const request = this.#check(signal, key, options, probe);
    return (await this.#obtain(signal, key, request, false, probe))?.lease();
  }

  /**
   * Stops the locker: idempotent; refuses new calls, rejects waiters with
   * {@link LockerClosedError}, stops the heartbeat, and resolves once the connection is back in the
   * pool — at once when no lease is held. Held leases keep the connection (and their locks) until
   * they are released or `expiry` ms have passed, when the connection is destroyed and the server
   * frees them; their releases still work meanwhile.
   */
  override close(): Promise<void> {
    this.#closed ??= this.#close();
    return this.#closed;
  }

  async #close(): Promise<void> {
    this.#closing.abort(new LockerClosedError());
    this.#stopHeartbeat();
    await this.#connecting?.catch(() => undefined);
    const session = this.#session;
    if (session === undefined) return;
    if (session.holds.size === 0) {
      await session.retire();
      return;
    }
    const timer = setTimeout(() => session.end("unconfirmed", new LockerClosedError()), this.#options.expiry);
    timer.unref();
  }

  /**
   * Validates a call (options, then signal and key; `probe` is told the weight once it is valid)
   * and refuses it when closed or aborted.
   */
  #check(signal: unknown, key: unknown, options: unknown, probe: AcquireProbe | undefined): Request {
    const { fencing, weight, autoExtend, expiry } = resolveAcquireOptions(options);
    checkWeight(weight, 1, LOCK_LIMIT);
    if (probe !== undefined) probe.weight = weight;
    if (expiry !== undefined) validateTimerDelay("options.expiry", expiry);
    validateSignal(signal);
    validateKey(key);
    if (this.#closing.signal.aborted) throw this.#closing.signal.reason;
    (signal as AbortSignal | undefined)?.throwIfAborted();
    if (expiry === undefined && !fencing && autoExtend) return defaultRequest(this.#options.expiry);
    return { fencing, autoExtend, expiry: expiry ?? this.#options.expiry };
  }

  /**
   * Takes `key`: one attempt when `wait` is false (resolving to `undefined` when it is held, here
   * or elsewhere), otherwise attempts until it holds it, `signal` aborts or the locker closes.
   * `probe` (while traced) counts the attempts.
   */
  async #obtain(
    signal: AbortSignal | undefined,
    key: string,
    request: Request,
    wait: boolean,
    probe: AcquireProbe | undefined,
  ): Promise<Hold | undefined> {
    const state = this.#keys.open(key);
    if (!wait) {
      try {
        if (state.held !== 0 || state.attempting || state.waiters.size !== 0) return undefined;
        return (await this.#attempt(signal, key, state, request, false, undefined, probe)).hold;
      } finally {
        this.#keys.tidy(key, state);
      }
    }
    const waiter = new Waiter();
    state.waiters.push(waiter);
    let marked: Session | undefined;
    let counted = false;
    let backoff: Backoff | undefined;
    let hold: Hold | undefined;
    try {
      for (;;) {
        let delay: number | undefined;
        if (state.waiters.head === waiter && state.held === 0 && !state.attempting) {
          const result = await this.#attempt(signal, key, state, request, true, marked, probe);
          if (result.hold !== undefined) {
            hold = result.hold;
            marked = undefined;
            return hold;
          }
          marked = result.marked;
          // A releaser was checking the marker at that instant: try again at once.
          if (marked === undefined) delay = 1;
        }
        if (!counted) {
          counted = true;
          this.#waiting += 1;
        }
        backoff ??= new Backoff(this.#options.backoffMin, this.#options.backoffMax);
        await waiter.wait(delay ?? backoff.next(), [signal, this.#closing.signal]);
      }
    } finally {
      if (counted) this.#waiting -= 1;
      if (marked !== undefined && !marked.ended) {
        const [high, low] = markerOf(lockId(this.#resource(key, state)));
        marked.query(UNMARK_SQL, [high, low]).catch(() => undefined);
      }
      this.#keys.leave(key, state, waiter, true);
    }
  }

  /**
   * One attempt on `key` (its state says nobody here holds it or is asking). With `mark`, the caller
   * is marked as a waiter when the key is taken; `marked` is the session it is marked on already.
   * An attempt that succeeds after `signal` aborted or the locker closed is released at once
   * (without a release message: the caller never got it). `probe` (while traced) counts it.
   */
  async #attempt(
    signal: AbortSignal | undefined,
    key: string,
    state: KeyState,
    request: Request,
    mark: boolean,
    marked: Session | undefined,
    probe: AcquireProbe | undefined,
  ): Promise<{ hold?: Hold; marked?: Session }> {
    if (probe !== undefined) probe.attempts += 1;
    const resource = this.#resource(key, state);
    state.attempting = true;
    let row: AttemptRow | undefined;
    let session: Session;
    try {
      session = await this.#connect(signal, resource);
      if (request.fencing) await this.#ensureSequence(session, resource);
      const id = lockId(resource);
      const stillMarked = marked === session;
      const markNow = mark && !stillMarked;
      [row] = await this.#run(
        session,
        resource,
        !markNow && !stillMarked && !request.fencing ? TRY_SQL : ATTEMPT_SQL,
        !markNow && !stillMarked && !request.fencing
          ? [id.toString()]
          : [
              id.toString(),
              ...markerOf(id),
              markNow,
              stillMarked,
              request.fencing,
              request.fencing ? this.#options.fencingSequence : null,
            ],
      );
      if (row?.ok !== true) {
        const nowMarked = stillMarked || row?.marked === true;
        return nowMarked ? { marked: session } : {};
      }
    } finally {
      state.attempting = false;
    }
    state.held = 1;
    const hold = new Hold(
      this.#owner,
      session,
      key,
      resource,
      request,
      row.token === null ? undefined : BigInt(row.token),
    );
    this.#track(hold);
    const reason = signal?.aborted
      ? signal.reason
      : this.#closing.signal.aborted
        ? this.#closing.signal.reason
        : undefined;
    if (reason !== undefined) {
      await hold.abandon();
      throw reason;
    }
    return { hold };
  }

  /** Runs a statement of an acquisition; a failure is a {@link StoreUnavailableError} with its cause. */
  async #run(session: Session, resource: string, text: string, values: unknown[]): Promise<AttemptRow[]> {
    try {
      return await session.query<AttemptRow>(text, values);
    } catch (error) {
      // The fencing sequence was dropped (or never made it to disk): create it again next time.
      if ((error as { code?: unknown }).code === "42P01") this.#sequenceReady = undefined;
      throw new StoreUnavailableError(resource, `PostgreSQL failed on "${resource}": ${messageOf(error)}`, {
        cause: error,
      });
    }
  }

  /** Creates the fencing sequence once per locker (concurrent creators are harmless). */
  async #ensureSequence(session: Session, resource: string): Promise<void> {
    this.#sequenceReady ??= session
      .query(`CREATE SEQUENCE IF NOT EXISTS ${this.#options.fencingSequence}`, undefined)
      .then(
        () => undefined,
        (error: unknown) => {
          const code = (error as { code?: unknown }).code;
          // Two sessions creating it at once: one wins, the other sees a duplicate.
          if (code === "23505" || code === "42P07") return;
          this.#sequenceReady = undefined;
          throw error;
        },
      );
    try {
      await this.#sequenceReady;
    } catch (error) {
      throw new StoreUnavailableError(
        resource,
        `PostgreSQL could not create the fencing sequence ${this.#options.fencingSequence}: ${messageOf(error)}`,
        { cause: error },
      );
    }
  }

  /** The locker's session, checked out of the pool (and set up) if there is none. */
  #connect(signal: AbortSignal | undefined, resource: string): Promise<Session> {
    const session = this.#session;
    if (session !== undefined && !session.ended) return Promise.resolve(session);
    this.#connecting ??= this.#open(resource).finally(() => {
      this.#connecting = undefined;
    });
    return abortable(this.#connecting, [signal, this.#closing.signal]);
  }

  async #open(resource: string): Promise<Session> {
    const { connectTimeout, operationTimeout, expiry } = this.#options;
    const connecting = this.#pool.connect();
    let timer: NodeJS.Timeout | undefined;
    let client: PostgresPoolClient;
    try {
      client = await new Promise<PostgresPoolClient>((resolve, reject) => {
        timer = setTimeout(
          () =>
            reject(
              new Error(
                `no connection from the pool within ${connectTimeout} ms (is the pool exhausted, or PostgreSQL unreachable?)`,
              ),
            ),
          connectTimeout,
        );
        connecting.then(resolve, reject);
      });
    } catch (error) {
      // A connection that arrives after the timeout goes straight back.
      connecting.then(
        (late) => late.release(),
        () => undefined,
      );
      throw new StoreUnavailableError(resource, `PostgreSQL is unavailable: ${messageOf(error)}`, { cause: error });
    } finally {
      clearTimeout(timer);
    }
    const session = new Session(client, operationTimeout, this.#channel, {
      notified: (key) => this.#keys.notifyHead(key),
      ended: (ended, how, cause) => this.#ended(ended, how, cause),
    });
    try {
      await session.setUp(expiry);
    } catch (error) {
      session.end("dropped", error);
      throw new StoreUnavailableError(resource, `PostgreSQL is unavailable: ${messageOf(error)}`, { cause: error });
    }
    if (this.#closing.signal.aborted) {
      await session.retire();
      throw this.#closing.signal.reason;
    }
    this.#session = session;
    this.#scheduleHeartbeat();
    return session;
  }

  /**
   * A session ended: unless it was retired, every lock on it is lost (a heartbeat in flight on it
   * is published as failed first). Waiters try again.
   */
  #ended(session: Session, how: SessionEnd, cause: unknown): void {
    if (this.#session === session) {
      this.#session = undefined;
      this.#stopHeartbeat();
    }
    const reason = how === "dropped" && !idleTimeout(cause) ? "taken" : "expired";
    const beating = this.#beating;
    if (beating?.session === session) {
      this.#beating = undefined;
      if (how !== "retired") beating.failed(reason, cause);
    }
    for (const hold of [...session.holds] as Hold[]) {
      hold.lose(new LockLostError(hold.key, reason, { cause }));
    }
    this.#keys.notifyAllHeads();
  }

  // Bookkeeping of held acquisitions (called by Hold).

  #track(hold: Hold): void {
    hold.session.holds.add(hold);
    if (hold.request.autoExtend) {
      this.#lengths.set(hold.request.expiry, (this.#lengths.get(hold.request.expiry) ?? 0) + 1);
      if (hold.request.expiry < this.#options.expiry) this.#scheduleHeartbeat();
    }
  }

  /** Forgets `hold` (released, expired or lost) and wakes the key's next waiter here. */
  #untrack(hold: Hold): void {
    if (!hold.session.holds.delete(hold)) return;
    if (hold.request.autoExtend) {
      const count = (this.#lengths.get(hold.request.expiry) ?? 1) - 1;
      if (count === 0) this.#lengths.delete(hold.request.expiry);
      else this.#lengths.set(hold.request.expiry, count);
    }
    const state = this.#keys.get(hold.key);
    if (state !== undefined) {
      state.held = 0;
      state.waiters.head?.notify();
      this.#keys.tidy(hold.key, state);
    }
  }

  /**
   * Unlocks `hold` in PostgreSQL (NOTIFYing marked waiters); on one connection, statements run in
   * order, so a local waiter's attempt sent after this sees the key free.
   */
  async #free(hold: Hold): Promise<ReleaseOutcome> {
    const { session } = hold;
    this.#untrack(hold);
    if (session.ended) return "expired";
    try {
      const id = lockId(hold.resource);
      const [row] = await session.query<{ released: boolean }>(RELEASE_SQL, [
        id.toString(),
        ...markerOf(id),
        this.#channel,
        hold.key,
      ]);
      return row?.released === true ? "released" : "expired";
    } catch {
      return session.ended ? "expired" : "unknown";
    } finally {
      if (this.#closing.signal.aborted && session.holds.size === 0) await session.retire();
    }
  }

  /** Calls `onLockLost`, swallowing its errors. */
  #reportLost(error: LockLostError): void {
    try {
      this.#options.onLockLost?.(error);
    } catch {
      // a throwing hook must not break the locker
    }
  }

  /** The session confirmation bound of a lease of `length` ms: the server ends an idle session after `expiry`. */
  #sessionValidUntil(session: Session, length: number): number {
    return session.confirmedAt + Math.min(length, this.#options.expiry);
  }

  #resource(key: string, state: KeyState): string {
    state.resource ??= this.#options.prefix + key;
    return state.resource;
  }

  // The heartbeat: confirms the session every (shortest held lease length) / 2.

  #scheduleHeartbeat(): void {
    const session = this.#session;
    if (session === undefined || this.#closing.signal.aborted) return;
    let shortest = this.#options.expiry;
    for (const length of this.#lengths.keys()) shortest = Math.min(shortest, length);
    const at = session.confirmedAt + shortest / 2;
    if (this.#heartbeat !== undefined && this.#heartbeatAt <= at) return;
    this.#stopHeartbeat();
    this.#heartbeatAt = at;
    this.#heartbeat = setTimeout(() => this.#beat(session), Math.max(0, at - performance.now()));
    this.#heartbeat.unref();
  }

  #stopHeartbeat(): void {
    clearTimeout(this.#heartbeat);
    this.#heartbeat = undefined;
    this.#heartbeatAt = Number.POSITIVE_INFINITY;
  }

  #beat(session: Session): void {
    const plannedAt = this.#heartbeatAt;
    this.#heartbeat = undefined;
    this.#heartbeatAt = Number.POSITIVE_INFINITY;
    const beating = startHeartbeat(this.diagnostics, session, plannedAt);
    this.#beating = beating;
    session.query("SELECT 1", undefined).then(
      () => {
        if (this.#beating === beating) this.#beating = undefined;
        beating?.succeeded();
        this.#scheduleHeartbeat();
      },
      (error: unknown) => session.end("unconfirmed", error),
    );
  }
}

/** The request of a plain call, per locker expiry (shared: resolving nothing allocates nothing). */
const defaultRequests = new Map<number, Request>();
function defaultRequest(expiry: number): Request {
  let request = defaultRequests.get(expiry);
  if (request === undefined) {
    request = Object.freeze({ fencing: false, autoExtend: true, expiry });
    defaultRequests.set(expiry, request);
  }
  return request;
}

/** Whether the server ended the session for idleness (SQLSTATE 57P05): the locks expired. */
function idleTimeout(cause: unknown): boolean {
  return (cause as { code?: unknown } | undefined)?.code === "57P05";
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
