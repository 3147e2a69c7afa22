import type { LockHandle } from "../backend.js";
import { hashTagOf } from "./keys.js";

/**
 * The indexes of `handles` in groups that one script or transaction may touch together: on a
 * Cluster, keys that share a hash tag (a key without one alone: its slot is its own), elsewhere
 * all of them. Handles whose validity ran out by `liveAt` (when given) are left out.
 */
export function slotGroups(handles: readonly LockHandle[], cluster: boolean, liveAt?: number): number[][] {
  const groups = new Map<string, number[]>();
  for (let index = 0; index < handles.length; index++) {
    const handle = handles[index] as LockHandle;
    if (liveAt !== undefined && liveAt >= handle.validUntil) continue;
    const group = cluster ? (hashTagOf(handle.resource) ?? handle.resource) : "";
    const members = groups.get(group);
    if (members === undefined) groups.set(group, [index]);
    else members.push(index);
  }
  return Array.from(groups.values());
}
