import type { StoredHolder, StoredView } from "../backend.js";
import { ownerOfToken, weightOfToken } from "./owner-token.js";

/*
 * What the Redis stores' `inspect` answers, read from the replies of their read-only scripts and
 * transactions: the owner and weight come from each token (see owner-token.ts), the time left
 * from the node.
 */

/** A PTTL as time left: a key without a TTL (-1) never expires on its own. */
export function timeLeft(pttl: unknown): number {
  const left = Number(pttl);
  return left === -1 ? Number.POSITIVE_INFINITY : Math.max(0, left);
}

/** The holder of a lock key with `token` and `pttl` left. */
export function lockHolder(token: string, pttl: unknown): StoredHolder {
  return { owner: ownerOfToken(token), weight: 1, expiresInMs: timeLeft(pttl) };
}

/** A lock key's view: its holder where `token` is one (not `""`), and `waiting` queued. */
export function lockView(token: unknown, pttl: unknown, waiting: unknown): StoredView {
  const holders = typeof token === "string" && token !== "" ? [lockHolder(token, pttl)] : [];
  return { holders, waiting: Number(waiting) || 0 };
}

/**
 * A permit set's view from INSPECT_PERMITS's reply: the node's time (ms), the waiters queued,
 * then each live member with its deadline (ms).
 */
export function permitView(reply: readonly unknown[]): StoredView {
  const [now, waiting, ...entries] = reply;
  const holders: StoredHolder[] = [];
  for (let index = 0; index + 1 < entries.length; index += 2) {
    const member = String(entries[index]);
    const expiresInMs = Math.max(0, Number(entries[index + 1]) - Number(now));
    holders.push({ owner: ownerOfToken(member), weight: weightOfToken(member), expiresInMs });
  }
  return { holders, waiting: Number(waiting) || 0 };
}
