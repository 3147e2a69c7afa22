import { performance } from "node:perf_hooks";
import type * as contract from "../backend.js";
import { UnsupportedError } from "../errors.js";
import { unavailable } from "./store-errors.js";
import { leaseHandle, ranOutOnArrival } from "./validity.js";

/** What a swap of a key's token answers: done, or why not (another token holds the key; the key is gone). */
export type SwapOutcome = "swapped" | "taken" | "expired";

/**
 * `adopt` on one node (see `HandOff.adopt`): `swap(from, to)` puts the token `to` where the key
 * of `request.resource` holds `from`, here `fresh` (a token of this locker) for the handed-off
 * one, with a lease of `request.duration`. A swap that fails is undone by a swap back, sent right
 * behind it on the same connection, so the handle stays adoptable and no key is left with a token
 * nobody has; a refusal (an UnsupportedError: the node runs no scripts) swapped nothing.
 *
 * @param store releases an adopted lease that ran out before the answer arrived (see `ranOutOnArrival`).
 */
export async function adoptBySwap(
  request: contract.AdoptRequest,
  fresh: string,
  driftFactor: number,
  store: { release(handle: contract.LockHandle): Promise<unknown> },
  swap: (from: string, to: string) => Promise<SwapOutcome>,
): Promise<contract.LockHandle | "taken" | "expired"> {
  const { resource, token, duration } = request;
  const start = performance.now();
  let swapped: SwapOutcome;
  try {
    swapped = await swap(token, fresh);
  } catch (error) {
    if (error instanceof UnsupportedError) throw error;
    swap(fresh, token).catch(() => undefined);
    throw unavailable(resource, "adopt", [error], "single");
  }
  if (swapped !== "swapped") return swapped;
  const handle = leaseHandle(fresh, resource, start, duration, driftFactor);
  return ranOutOnArrival(handle, store) ? "expired" : handle;
}
