/**
 * A key's holders and waiters as `globallock` shows them (`Locker.inspect`'s answer): one line of
 * text per holder, and the JSON of `globallock status --json` and of the `waiting` and
 * `not-acquired` events (documented in docs/reference.md, "globallock status").
 */
import type { HolderInfo, LockInfo } from "../locker.js";
import { formatMs } from "./reporter.js";

/** One holder in JSON: `expiresInMs` rounded (`null`: held until released), the fencing token as a string. */
export interface HolderJson {
  readonly owner: string;
  readonly mode: HolderInfo["mode"];
  readonly weight: number;
  readonly expiresInMs: number | null;
  readonly fencingToken?: string;
}

/** {@link LockInfo} in JSON (see the module comment). */
export interface LockInfoJson {
  readonly held: boolean;
  readonly holders: readonly HolderJson[];
  readonly waiting: number;
}

/** `info` as JSON can carry it (no bigint, no Infinity). */
export function lockInfoJson(info: LockInfo): LockInfoJson {
  const holders = info.holders.map((holder): HolderJson => {
    const { owner, mode, weight, expiresInMs, fencingToken } = holder;
    const base = { owner, mode, weight, expiresInMs: Number.isFinite(expiresInMs) ? Math.round(expiresInMs) : null };
    return fencingToken === undefined ? base : { ...base, fencingToken: fencingToken.toString() };
  });
  return { held: holders.length > 0, holders, waiting: info.waiting };
}

/** "host:1234 (exclusive, lease ends in 12.0 s unless extended, fencing token 7)". */
export function describeHolder(holder: HolderInfo): string {
  const parts: string[] = [holder.mode];
  if (holder.weight > 1) parts.push(`weight ${holder.weight}`);
  parts.push(
    Number.isFinite(holder.expiresInMs)
      ? `lease ends in ${formatMs(holder.expiresInMs)} unless extended`
      : "held until released",
  );
  if (holder.fencingToken !== undefined) parts.push(`fencing token ${holder.fencingToken}`);
  return `${holder.owner || "(owner unknown)"} (${parts.join(", ")})`;
}

/** Who holds a key, in a few words: its one holder, or how many share it ("someone else" if unknown). */
export function describeHolders(info: LockInfo | undefined): string {
  if (info === undefined || info.holders.length === 0) return "someone else";
  const [first] = info.holders;
  return info.holders.length === 1 && first !== undefined ? describeHolder(first) : `${info.holders.length} holders`;
}
