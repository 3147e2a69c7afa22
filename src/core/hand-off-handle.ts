import { InvalidArgumentError } from "../errors.js";

/** What a hand-off handle says about the lease it hands over (see `Lease.handOff`). */
export interface HandOffContent {
  /** The locker kind and the store's scope (store and prefix): a handle adopts only there. */
  readonly scope: string;
  /** The caller's key. */
  readonly key: string;
  /** The token the lease is held with. */
  readonly token: string;
  /** Permits held, as the store counts them. */
  readonly weight: number;
  /** The lease length, in ms. */
  readonly duration: number;
  /** The grant's fencing token, when it had one. */
  readonly fencingToken: bigint | undefined;
}

/** What every handle starts with (a version: a later format gets another). */
const MARK = "globallock-lease.v1.";

/** Encodes `content` as a handle: the mark, then base64url of a small JSON object. */
export function encodeHandOff(content: HandOffContent): string {
  const { scope, key, token, weight, duration, fencingToken } = content;
  const fields = { s: scope, k: key, t: token, w: weight, d: duration, f: fencingToken?.toString() };
  return MARK + Buffer.from(JSON.stringify(fields), "utf8").toString("base64url");
}

/**
 * Decodes a handle made by {@link encodeHandOff}; throws an {@link InvalidArgumentError} naming
 * what is wrong (the value itself is a secret: the message shows only its start).
 */
export function decodeHandOff(handle: unknown): HandOffContent {
  if (typeof handle !== "string" || !handle.startsWith(MARK)) {
    throw new InvalidArgumentError("handle", `a string from Lease.handOff() (starting "${MARK}")`, handle);
  }
  let fields: unknown;
  try {
    fields = JSON.parse(Buffer.from(handle.slice(MARK.length), "base64url").toString("utf8"));
  } catch {
    fields = undefined;
  }
  const content =
    typeof fields === "object" && fields !== null ? toContent(fields as Record<string, unknown>) : undefined;
  if (content === undefined)
    throw new InvalidArgumentError("handle", "a handle from Lease.handOff() (it is malformed)", handle);
  return content;
}

function toContent(fields: Record<string, unknown>): HandOffContent | undefined {
  const { s, k, t, w, d, f } = fields;
  if (typeof s !== "string" || typeof k !== "string" || typeof t !== "string" || t === "") return undefined;
  if (typeof w !== "number" || !Number.isSafeInteger(w) || w < 1) return undefined;
  if (typeof d !== "number" || !Number.isSafeInteger(d) || d < 1) return undefined;
  if (f !== undefined && (typeof f !== "string" || !/^\d+$/.test(f))) return undefined;
  return { scope: s, key: k, token: t, weight: w, duration: d, fencingToken: f === undefined ? undefined : BigInt(f) };
}
