/**
 * A lock entry: the holder's record, all in the name of one empty directory inside a key's lock
 * (see `store.ts`). Its name is
 *
 * ```
 * T.D.W.A.P.S.N.B.F.O.host
 * ```
 *
 * the random 16-byte token `T` (hex); the deadline `D` in ms on the boot's monotonic clock and
 * the same deadline `W` in wall-clock ms; the wall-clock grant time `A`; the holder's pid `P`, its
 * start time `S` (clock ticks since boot), its pid namespace `N`; the boot id `B` (32 hex digits,
 * `0` where unknown; `P`, `S` and `N` are 0 in a lease handed off to another process, which only
 * its deadline ends); the grant's fencing token `F` (`0`: none); the holder locker's `owner` `O`
 * (see `owner.ts`: percent-encoded, or a reference to an owner file when it is too long for a
 * name), followed in a holder's entry by `%~` and the caller's key (see `key-field.ts`); and the
 * host name.
 *
 * Reading an entry: another process of the same host and boot compares `D` with its own monotonic
 * clock (wall-clock steps move neither) and can tell whether the holder is dead; any other reader
 * (another boot id, or none known) can only compare `W` with its wall clock.
 */
import { BOOT_ID, HOST, monotonicNow, PID_NAMESPACE, processGone, SELF_START_TIME } from "./host.js";

/** A held entry, as named in its lock directory. */
export interface Entry {
  /** The entry's name (see the module comment). */
  readonly name: string;
  readonly token: string;
  /** Ms on the writer's boot's monotonic clock at which the lease runs out. */
  readonly deadline: number;
  /** Wall-clock ms (`Date.now()`) at which the lease runs out, as the writer's clock said. */
  readonly wallDeadline: number;
  /** Wall-clock ms of the grant. */
  readonly acquiredAt: number;
  readonly pid: number;
  /** The holder's start time in clock ticks since boot (0: unknown). */
  readonly startTime: number;
  /** The inode of the holder's pid namespace (0: unknown). */
  readonly pidNamespace: number;
  /** The boot id of the writer's host (`""`: unknown). */
  readonly bootId: string;
  /** The grant's fencing token (`undefined`: none was issued with the grant). */
  readonly fence: bigint | undefined;
  /** The holder's owner as the name carries it (see `owner.ts`; `""`: none). */
  readonly owner: string;
  /**
   * The caller's key as the name carries it (see `key-field.ts`): `""` in a queue ticket and in an
   * entry written before keys were recorded.
   */
  readonly keyField: string;
  readonly host: string;
}

const ENTRY =
  /^([0-9a-f]{32})\.(\d{1,16})\.(\d{1,16})\.(\d{1,16})\.(\d{1,10})\.(\d{1,20})\.(\d{1,20})\.([0-9a-f]{32}|0)\.(\d{1,20})\.([^.]*)\.(.+)$/;

/** Fencing tokens an entry's name can carry: below 10^20 (20 digits). */
const MAX_FENCE = 10n ** 20n;

/** The longest name a file system takes (NAME_MAX on Linux and macOS, in bytes). */
const NAME_MAX = 255;

/** The characters a queue ticket adds before an entry's name (`<seq>.<r|w>.`, see `permits.ts`). */
const TICKET_PREFIX = 19;

/** What separates the owner from the key in an entry's owner field (never in a percent-encoding). */
export const KEY_SEPARATOR = "%~";

/**
 * The longest owner field an entry of this process can carry and stay within {@link NAME_MAX}:
 * the name's other fields at their longest (deadlines of 16 digits, a fencing token of 20) plus
 * the {@link TICKET_PREFIX} a queue ticket adds before an entry's name.
 */
export const MAX_OWNER_FIELD =
  NAME_MAX -
  (32 + 3 * 16 + 20 + TICKET_PREFIX + 11) -
  `${process.pid}${SELF_START_TIME}${PID_NAMESPACE}${BOOT_ID || "0"}${HOST}`.length;

/**
 * The longest owner and key fields together, with their {@link KEY_SEPARATOR}, that a holder's
 * entry of this process can carry: a holder's entry is never a ticket's (tickets carry neither
 * field), so it has the ticket's room too.
 */
export const MAX_HOLDER_FIELDS = MAX_OWNER_FIELD + TICKET_PREFIX;

/** The fields P.S.N.B of an entry of this process (see {@link entryOf}), made once. */
const PROCESS_FIELDS = `${process.pid}.${SELF_START_TIME}.${PID_NAMESPACE}.${BOOT_ID || "0"}`;
/** The fields P.S.N.B of a detached entry: no process. */
const DETACHED_FIELDS = `0.0.0.${BOOT_ID || "0"}`;

/** Parses an entry name; `undefined` for anything else. */
export function parseEntry(name: string): Entry | undefined {
  const match = ENTRY.exec(name);
  if (match === null) return undefined;
  const [, token, deadline, wall, acquiredAt, pid, start, namespace, boot, fence, holder, host] =
    match as unknown as string[];
  const split = (holder as string).indexOf(KEY_SEPARATOR);
  return {
    name,
    token: token as string,
    deadline: Number(deadline),
    wallDeadline: Number(wall),
    acquiredAt: Number(acquiredAt),
    pid: Number(pid),
    startTime: Number(start),
    pidNamespace: Number(namespace),
    bootId: boot === "0" ? "" : (boot as string),
    fence: fence === "0" ? undefined : BigInt(fence as string),
    owner: split < 0 ? (holder as string) : (holder as string).slice(0, split),
    keyField: split < 0 ? "" : (holder as string).slice(split + KEY_SEPARATOR.length),
    host: host as string,
  };
}

/**
 * An entry of this process with `token`, granted at `acquiredAt`, running out `expiry` ms from
 * now, for `owner` (an owner field of at most {@link MAX_OWNER_FIELD} characters, see `owner.ts`)
 * with the grant's fencing token `fence`, recording the key field `keyField` (a holder's; with the
 * owner field, at most {@link MAX_HOLDER_FIELDS} characters: see `key-field.ts`).
 */
export function entryOf(
  token: string,
  expiry: number,
  acquiredAt: number,
  owner = "",
  fence: bigint | undefined = undefined,
  detached = false,
  keyField = "",
): Entry {
  const deadline = monotonicNow() + expiry;
  const wallDeadline = Date.now() + expiry;
  // A token too long for its field (never in practice: 20 digits) is left out rather than break the name.
  const kept = fence !== undefined && fence > 0n && fence < MAX_FENCE ? fence : undefined;
  // T.D.W.A.P.S.N.B.F.O.host (see the module comment). A detached entry (a lease handed off) names
  // no process: only its deadline ends it. The key rides in O, after the owner: a reader of the
  // format without keys reads every other field as before (and the owner as unknown).
  const holder = keyField === "" ? owner : `${owner}${KEY_SEPARATOR}${keyField}`;
  const name = `${token}.${deadline}.${wallDeadline}.${acquiredAt}.${detached ? DETACHED_FIELDS : PROCESS_FIELDS}.${kept === undefined ? "0" : kept.toString()}.${holder}.${HOST}`;
  return {
    name,
    token,
    deadline,
    wallDeadline,
    acquiredAt,
    pid: detached ? 0 : process.pid,
    startTime: detached ? 0 : SELF_START_TIME,
    pidNamespace: detached ? 0 : PID_NAMESPACE,
    bootId: BOOT_ID,
    fence: kept,
    owner,
    keyField,
    host: HOST,
  };
}

/** Whether `entry`'s deadline is on this process's monotonic clock (same known boot). */
function sameBoot(entry: Entry): boolean {
  return BOOT_ID !== "" && entry.bootId === BOOT_ID;
}

/**
 * Ms left on `entry`'s lease as this process sees it: on the monotonic clock when the entry is of
 * this boot, else on the wall clock (the writer's wall clock against ours).
 */
export function remainingMs(entry: Entry): number {
  return sameBoot(entry) ? entry.deadline - monotonicNow() : entry.wallDeadline - Date.now();
}

/**
 * Whether `entry`'s holder is known to be dead: written on this host in an earlier boot, or, in
 * this boot and pid namespace, by a process that is gone (or whose pid now belongs to another
 * process). An entry of another host, pid namespace or unknown boot is never judged dead.
 */
export function holderDead(entry: Entry): boolean {
  if (entry.host !== HOST || BOOT_ID === "" || entry.bootId === "") return false;
  if (entry.bootId !== BOOT_ID) return true;
  if (PID_NAMESPACE === 0 || entry.pidNamespace !== PID_NAMESPACE) return false;
  return processGone(entry.pid, entry.startTime);
}

/** Whether `entry`'s lock can be taken over: its lease ran out, or its holder is dead. */
export function takeable(entry: Entry): boolean {
  return remainingMs(entry) <= 0 || holderDead(entry);
}
