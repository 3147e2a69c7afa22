import type { ExtendOutcome } from "../backend.js";
import type { ExtendOutcome as ExtendMessageOutcome } from "../diagnostics.js";
import { LockLostError } from "../errors.js";
import { publishExtend } from "../internal/diagnostics.js";
import type { Acquisition, AcquisitionOwner } from "./acquisition.js";

/**
 * Publishes what one extension command found: one message per locker, outcome and error, in the
 * batch's order (deadline first). Leases released while the command was in flight are left out.
 */
export function reportExtension(
  batch: readonly Acquisition[],
  outcomes: readonly ExtendOutcome[],
  lagMs: number,
  elapsedMs: number,
): void {
  // One extension message's worth of leases each: same locker, same outcome (and same error).
  const groups: { owner: AcquisitionOwner; outcome: ExtendMessageOutcome; error: Error | undefined; keys: string[] }[] =
    [];
  batch.forEach((acquisition, index) => {
    if (acquisition.state !== "held") return;
    const found = outcomes[index];
    const explained = found instanceof LockLostError;
    const outcome: ExtendMessageOutcome = explained
      ? found.reason === "taken"
        ? "taken"
        : "expired"
      : found instanceof Error || found === undefined
        ? "retry"
        : found;
    const error = explained
      ? found.cause instanceof Error
        ? found.cause
        : found
      : found instanceof Error
        ? found
        : undefined;
    const { owner } = acquisition;
    let group = groups.find((g) => g.owner === owner && g.outcome === outcome && g.error === error);
    if (group === undefined) {
      group = { owner, outcome, error, keys: [] };
      groups.push(group);
    }
    group.keys.push(acquisition.key);
  });
  for (const { owner, outcome, error, keys } of groups) {
    publishExtend({
      key: keys[0] as string,
      keys,
      count: keys.length,
      locker: owner.locker,
      kind: owner.kind,
      outcome,
      error,
      lagMs,
      elapsedMs,
    });
  }
}
