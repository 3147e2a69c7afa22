import { type KeyDirectory, parseEntry } from "./layout.js";
import type { EtcdKeyValue, EtcdRangeRequest, EtcdTxnResponse } from "./types.js";

/*
 * Pure helpers over etcd's range reads: the request of a key's directory, what a transaction's
 * range answer holds, and how the entries it found add up against the limit.
 */

/** The range request of a key's directory, oldest entry first. */
export function rangeOf(directory: KeyDirectory): EtcdRangeRequest {
  return { key: directory.start, range_end: directory.end, sort_target: "Create", sort_order: "Ascend" };
}

/** The entries of a transaction's first (range) answer. */
export function rangeIn(answer: EtcdTxnResponse): EtcdKeyValue[] {
  return answer.responses[0]?.response_range?.kvs ?? [];
}

/** The store revision a transaction's first (range) answer was read at. */
export function rangeRevision(answer: EtcdTxnResponse): string {
  return answer.responses[0]?.response_range?.header.revision ?? answer.header.revision;
}

/** Permits held and queued in `kvs`. */
export function total(kvs: readonly EtcdKeyValue[], limit: number): number {
  let sum = 0;
  for (const kv of kvs) sum += parseEntry(kv.value, limit).weight;
  return sum;
}

/** Whether `mine` holds: the weights of the entries created before it, plus its own, fit `limit`. */
export function fits(kvs: readonly EtcdKeyValue[], mine: EtcdKeyValue, limit: number): boolean {
  const created = BigInt(mine.create_revision);
  let sum = parseEntry(mine.value, limit).weight;
  for (const kv of kvs) if (BigInt(kv.create_revision) < created) sum += parseEntry(kv.value, limit).weight;
  return sum <= limit;
}

/** A key of one zero byte: etcd's "no end" for a range, and the first key past any name. */
export const ZERO = Buffer.from([0]);

/** The first key past every key that starts with `prefix` (etcd's "prefix end"; `\0`: no end). */
export function prefixEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let index = end.length - 1; index >= 0; index--) {
    if ((end[index] as number) < 0xff) {
      end[index] = (end[index] as number) + 1;
      return end.subarray(0, index + 1);
    }
  }
  return ZERO;
}
