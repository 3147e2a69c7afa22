/*
 * What the table backend asks of a database, written once for every dialect: each operation is a
 * plan, a generator of steps (one SQL statement each on PostgreSQL and SQLite; MySQL, which has no
 * RETURNING, may need two). A dialect runs a plan's steps on one connection — in one transaction
 * when asked — and feeds each step's answer back. SQLite runs them synchronously, so nothing else
 * of this process runs inside its transaction; a plan is pure until it returns, so a dialect may
 * run it again from the start after a deadlock or a busy database.
 */

import { totalWeight } from "../internal/total-weight.js";

/** A lease row as an attempt reads it: server clock, milliseconds since the epoch. */
export interface LeaseRow {
  /** Its place in the key's queue, and a write lease's fencing token (rows are numbered as made). */
  readonly id: bigint;
  readonly token: string;
  readonly owner: string;
  readonly weight: number;
  readonly expiresAt: number;
}

/** A row to insert, but for its expiry: the key's name (prefix and key), and the lease's token, owner and weight. */
export interface NewRow {
  readonly name: string;
  readonly token: string;
  readonly owner: string;
  readonly weight: number;
}

/** A key's rows, oldest first (expired ones too), and the server's clock when they were read. */
export interface KeyRows {
  readonly now: number;
  readonly rows: readonly LeaseRow[];
}

/** One thing a plan asks a database, and the answer's type. */
export type Step =
  /** Create the tables and indexes that are missing. */
  | { readonly op: "create" }
  /** Lock the key's row in `<table>_keys` until the transaction ends (made if missing; SQLite: nothing). */
  | { readonly op: "lock"; readonly name: string }
  /** The key's rows, and the clock. */
  | { readonly op: "rows"; readonly name: string }
  /** Insert a row that expires `ttl` ms from now; answers its id. */
  | ({ readonly op: "insert"; readonly ttl: number } & NewRow)
  /** Set the rows of `tokens` that have not expired to expire `ttl` ms from now; answers the tokens set. */
  | { readonly op: "renew"; readonly tokens: readonly string[]; readonly ttl: number }
  /** Delete the rows of `tokens` that have expired; answers how many. */
  | { readonly op: "purge"; readonly tokens: readonly string[] }
  /**
   * Delete the row of `token` (and the key's row in `<table>_keys` if nothing of the key is left
   * and nobody has it locked); answers whether the row was there and unexpired.
   */
  | { readonly op: "remove"; readonly name: string; readonly token: string }
  /** Whether the key has an unexpired row. */
  | { readonly op: "held"; readonly name: string }
  /** Give the unexpired row of `token` the token `fresh`, `owner`, and `ttl` ms; answers whether it did. */
  | {
      readonly op: "swap";
      readonly token: string;
      readonly fresh: string;
      readonly owner: string;
      readonly ttl: number;
    }
  /** Up to `limit` names with an unexpired row that start with `prefix`, in order. */
  | { readonly op: "names"; readonly prefix: string; readonly limit: number };

/** What each step answers. */
export interface Answers {
  readonly create: undefined;
  readonly lock: undefined;
  readonly rows: KeyRows;
  readonly insert: bigint;
  readonly renew: ReadonlySet<string>;
  readonly purge: number;
  readonly remove: "live" | "expired" | "absent";
  readonly held: boolean;
  readonly swap: boolean;
  readonly names: string[];
}

/** An operation, as the steps it sends. */
export type Plan<T> = Generator<Step, T, unknown>;

/** Asks one step: `const rows = yield* ask({ op: "rows", name })`. */
export function* ask<S extends Step>(step: S): Generator<Step, Answers[S["op"]], unknown> {
  return (yield step) as Answers[S["op"]];
}

/** A plan of one step. */
export function one<S extends Step>(step: S): () => Plan<Answers[S["op"]]> {
  return () => ask(step);
}

/** One attempt to take `weight` permits of `name`, as the backend asks it: the row it may insert, and how. */
export interface AttemptTerms extends NewRow {
  readonly limit: number;
  /** The lease length, in ms. */
  readonly duration: number;
  /** How long a waiter's row lives without a poll, in ms. */
  readonly liveness: number;
  /** On a miss, leave a row in the queue. */
  readonly join: boolean;
  /** The waiter's row from an earlier miss: it holds if it fits now. */
  readonly claim: string | undefined;
}

/** What an attempt found. */
export type AttemptAnswer =
  | { readonly kind: "acquired"; readonly token: string; readonly id: bigint }
  /** A miss that left (or kept) the waiter's row `token` in the queue. */
  | { readonly kind: "queued"; readonly token: string; readonly now: number; readonly retryAfterMs: number }
  | { readonly kind: "held"; readonly retryAfterMs: number };

/**
 * An attempt, in one transaction: lock the key, read its rows, delete the expired ones, and decide.
 * A key's rows form one queue in id order; a row holds when its weight and the weights of the
 * unexpired rows before it fit the limit. New rows go to the back, so a row's standing only ever
 * improves, and the rows that hold are a prefix of the queue (weights are positive): at most
 * `limit` permits are held, and waiters are served in arrival order across processes.
 *
 * - A claim (`terms.claim`, its waiter's earlier row): holds if it fits (its expiry becomes the
 *   lease's), else stays queued (its liveness renewed). A claim whose row is gone starts afresh.
 * - A fresh attempt holds when everything unexpired plus its weight fits; else it queues a row when
 *   it may (`join`), or leaves nothing.
 * - An expired row that is not deleted was extended meanwhile by its holder (whose statement began
 *   before this one read the clock): it still holds, so nothing is decided (a miss, retried soon).
 */
export function* attemptPlan(terms: AttemptTerms): Plan<AttemptAnswer> {
  const { name, weight, limit } = terms;
  yield* ask({ op: "lock", name });
  const { now, rows } = yield* ask({ op: "rows", name });
  const live = rows.filter((row) => row.expiresAt > now);
  if (live.length < rows.length) {
    const expired = rows.filter((row) => row.expiresAt <= now).map((row) => row.token);
    if ((yield* ask({ op: "purge", tokens: expired })) < expired.length) return { kind: "held", retryAfterMs: 1 };
  }
  let ahead = 0;
  for (let index = 0; index < live.length; index++) {
    const row = live[index] as LeaseRow;
    if (row.token !== terms.claim) {
      ahead += row.weight;
      continue;
    }
    const fits = ahead + row.weight <= limit;
    const ttl = fits ? terms.duration : terms.liveness;
    if ((yield* ask({ op: "renew", tokens: [row.token], ttl })).size === 1) {
      if (fits) return { kind: "acquired", token: row.token, id: row.id };
      return { kind: "queued", token: row.token, now, retryAfterMs: soonest(live.slice(0, index), now) };
    }
    break;
  }
  const fits = totalWeight(live.filter((row) => row.token !== terms.claim)) + weight <= limit;
  if (!fits && !terms.join) return { kind: "held", retryAfterMs: soonest(live, now) };
  const { token, owner } = terms;
  const ttl = fits ? terms.duration : terms.liveness;
  const id = yield* ask({ op: "insert", name, token, owner, weight, ttl });
  if (fits) return { kind: "acquired", token, id };
  return { kind: "queued", token, now, retryAfterMs: soonest(live, now) };
}

/**
 * A waiter's poll, without the key's lock (two statements, no transaction): reads the key's rows
 * and renews its own row — as the lease when it holds counting every row before it, expired or
 * not (a row's standing only improves, so a read that is out of date errs on the safe side), or
 * for its liveness when it does not hold counting only the unexpired ones. `undefined` when this
 * cannot decide: the row is gone, or it holds only if rows that expired are gone (which only the
 * locked attempt may decide, as it deletes them).
 */
export function* claimPlan(terms: AttemptTerms, claim: string): Plan<AttemptAnswer | undefined> {
  const { now, rows } = yield* ask({ op: "rows", name: terms.name });
  const index = rows.findIndex((row) => row.token === claim);
  const mine = rows[index];
  if (mine === undefined || mine.expiresAt <= now) return undefined;
  const ahead = rows.slice(0, index);
  const live = ahead.filter((row) => row.expiresAt > now);
  const holds = totalWeight(ahead) + mine.weight <= terms.limit;
  if (!holds && totalWeight(live) + mine.weight <= terms.limit) return undefined;
  const ttl = holds ? terms.duration : terms.liveness;
  if ((yield* ask({ op: "renew", tokens: [claim], ttl })).size === 0) return undefined;
  if (holds) return { kind: "acquired", token: claim, id: mine.id };
  return { kind: "queued", token: claim, now, retryAfterMs: soonest(live, now) };
}

/** Ms until the first of `rows` expires (at least 1): when an attempt may find more room. */
function soonest(rows: readonly LeaseRow[], now: number): number {
  let first = Number.POSITIVE_INFINITY;
  for (const row of rows) first = Math.min(first, row.expiresAt);
  return first === Number.POSITIVE_INFINITY ? 1 : Math.max(1, first - now + 1);
}

/**
 * A release: deletes the row; a row already gone is `"taken"` when the key is held by others now,
 * else `"expired"`.
 */
export function* removePlan(name: string, token: string): Plan<"live" | "expired" | "taken"> {
  const found = yield* ask({ op: "remove", name, token });
  if (found !== "absent") return found;
  return (yield* ask({ op: "held", name })) ? "taken" : "expired";
}

/**
 * An adoption: gives the handed-off row, if still unexpired, a fresh token and owner. A row gone is
 * `"taken"` when the key is held by others now, else `"expired"`.
 */
export function* adoptPlan(
  name: string,
  token: string,
  fresh: string,
  owner: string,
  ttl: number,
): Plan<"adopted" | "taken" | "expired"> {
  if (yield* ask({ op: "swap", token, fresh, owner, ttl })) return "adopted";
  return (yield* ask({ op: "held", name })) ? "taken" : "expired";
}
