/*
 * Where the ZooKeeper lockers keep a key: one persistent node per key under the locker's prefix
 * node, `<prefix>/<key>` (the key spelled as a node name, readable: see {@link nodeNameOf}), and
 * under it one ephemeral sequential node per holder and per queued waiter, named
 * `<slot>-<weight>-<sequence>`: a random slot (so an attempt cut short by a lost connection can
 * find the node it may have made), the permits it takes, and ZooKeeper's 10-digit sequence, which
 * orders the queue. The weight is in the name so that one `getChildren` tells every waiter where
 * it stands; the holder's owner is the node's data.
 */

import { totalWeight } from "../internal/total-weight.js";

/** A child of a key's node, as its name tells. */
export interface Entry {
  /** The node's name (a holder's token). */
  readonly name: string;
  /** Permits it takes (a node that is not one of ours weighs the whole limit). */
  readonly weight: number;
  /** Its place in the queue (ZooKeeper's sequence number; -1 for a foreign node without one). */
  readonly sequence: number;
}

/** Whether ZooKeeper refuses the UTF-16 code unit `code` in a path: controls, surrogates, private use, specials. */
export function isRefusedUnit(code: number): boolean {
  return code <= 0x1f || (code >= 0x7f && code <= 0x9f) || (code >= 0xd800 && code <= 0xf8ff) || code >= 0xfff0;
}

/**
 * The node name of `key`: the key itself, but for "%", "/" and the code units ZooKeeper refuses
 * (see {@link isRefusedUnit}), each written `%XX` (ASCII) or `%uXXXX`; and "." and ".." spelled
 * `%2E`. One name per key, one key per name.
 */
export function nodeNameOf(key: string): string {
  let name = "";
  for (let index = 0; index < key.length; index++) {
    const code = key.charCodeAt(index);
    if (code === 0x25 || code === 0x2f || isRefusedUnit(code))
      name += code < 0x80 ? `%${hex(code, 2)}` : `%u${hex(code, 4)}`;
    else name += key[index];
  }
  return name === "." || name === ".." ? name.replaceAll(".", "%2E") : name;
}

/** The key a node name spells (see {@link nodeNameOf}), or undefined for a name that is not one. */
export function keyOfNodeName(name: string): string | undefined {
  if (/%(?!u[0-9A-F]{4}|[0-9A-F]{2})/.test(name)) return undefined;
  const key = name.replace(/%(?:u([0-9A-F]{4})|([0-9A-F]{2}))/g, (_match, wide: string | undefined, narrow: string) =>
    String.fromCharCode(Number.parseInt(wide ?? narrow, 16)),
  );
  // A name escaped where it need not be (another program's node) spells no key of ours.
  return key !== "" && nodeNameOf(key) === name ? key : undefined;
}

function hex(code: number, digits: number): string {
  return code.toString(16).toUpperCase().padStart(digits, "0");
}

/** The name prefix of a node of `weight` permits in slot `slot` (ZooKeeper appends the sequence). */
export function entryPrefix(slot: string, weight: number): string {
  return `${slot}-${weight}-`;
}

const ENTRY = /^[0-9a-f]{32}-(\d{1,16})-(\d{10})$/;

/** Reads a child's name; a name that is not one of ours weighs `limit` (it blocks the key rather than letting holders in past it). */
export function parseEntry(name: string, limit: number): Entry {
  const match = ENTRY.exec(name);
  const weight = match === null ? limit : Number(match[1]);
  const sequence = /(\d{10})$/.exec(name)?.[1];
  return { name, weight: weight >= 1 ? weight : limit, sequence: sequence === undefined ? -1 : Number(sequence) };
}

/** The children of a key's node, in queue order. */
export function queueOf(children: readonly string[], limit: number): Entry[] {
  return children.map((name) => parseEntry(name, limit)).sort((a, b) => a.sequence - b.sequence);
}

/** The holders of a queue: the entries from the front whose weights, with those ahead, fit `limit`. */
export function holdersOf(queue: readonly Entry[], limit: number): Entry[] {
  let used = 0;
  const holders: Entry[] = [];
  for (const entry of queue) {
    if (used + entry.weight > limit) break;
    used += entry.weight;
    holders.push(entry);
  }
  return holders;
}

/**
 * Where `name` stands in `queue`: `"gone"` when it is not there; `"holds"` when the weights ahead
 * of it plus its own fit `limit`; else the nodes to watch — the fewest entries ahead of it whose
 * weights alone keep it out (the heaviest first, then the nearest), so that it cannot fit before
 * one of them goes: a lock's waiter watches the node just before its own, a reader the writer
 * ahead of it, and no release wakes a waiter it cannot let in (no herd).
 */
export function standingOf(queue: readonly Entry[], name: string, limit: number): "gone" | "holds" | Entry[] {
  const index = queue.findIndex((entry) => entry.name === name);
  if (index < 0) return "gone";
  const ahead = queue.slice(0, index);
  const room = limit - (queue[index] as Entry).weight;
  if (totalWeight(ahead) <= room) return "holds";
  const blockers: Entry[] = [];
  let blocking = 0;
  for (const entry of ahead.reverse().sort((a, b) => b.weight - a.weight)) {
    blockers.push(entry);
    blocking += entry.weight;
    if (blocking > room) break;
  }
  return blockers;
}
