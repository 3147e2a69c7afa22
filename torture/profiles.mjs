/**
 * Parameters of every scenario in each profile. `full` is what `npm run torture` runs (several
 * seeds, more processes and sections; about 5 minutes on 2 cores); `short` is the profile the
 * vitest suite runs inside `npm test` (one seed, fewer processes and sections).
 *
 * Times are in ms. `expiry` is the lease length; `backoffMax` the locker's safety-net wake-up bound;
 * `hold` the seeded range of a normal section's pause; `timeoutMs` bounds one run of the scenario.
 */

const EXPIRY = 1000;
const BACKOFF_MAX = 250;
const HOLD = { min: 0, max: 3 };

/** Settings shared by both profiles. */
const common = { expiry: EXPIRY, backoffMax: BACKOFF_MAX, hold: HOLD, timeoutMs: 120_000 };

/** Scenario 2: the long section, sampled every `sampleMs`. */
const longSection = { ...common, holdFactor: 5, sampleMs: 100 };
/** Scenario 3: `marginMs` on top of expiry + backoff.max; `clockSlackMs` for cross-process timestamps. */
const holderKilled = { ...common, marginMs: 500, clockSlackMs: 20 };
/** Scenarios 4 and 5: the stale holder. */
const staleHolder = { ...common, settleMs: 200, lostBoundMs: 500, clockSlackMs: 20 };
const holderPaused = { ...staleHolder, faultFactor: 3, victimHoldMs: 500, successorHoldMs: 3 * EXPIRY };
const loopBlocked = { ...staleHolder, faultFactor: 1.5, afterBlockMs: EXPIRY / 2, successorHoldMs: 2 * EXPIRY };

export const PROFILES = {
  full: {
    control: { ...common, seeds: [1], processes: 4, sections: 40, hold: { min: 1, max: 4 } },
    "no-faults": { ...common, seeds: [1, 2, 3], processes: 8, sections: 200, keys: 2 },
    memory: { ...common, seeds: [1, 2, 3], tasks: 50, sections: 20, keys: 2 },
    "long-section": { ...longSection, seeds: [1, 2], contenders: 3, warmup: 10 },
    "holder-killed": { ...holderKilled, seeds: [1, 2, 3], contenders: 3, warmup: 10 },
    "holder-paused": { ...holderPaused, seeds: [1, 2, 3], contenders: 3, warmup: 10 },
    "loop-blocked": { ...loopBlocked, seeds: [1, 2, 3], contenders: 3, warmup: 10 },
  },
  short: {
    control: { ...common, seeds: [1], processes: 3, sections: 20, hold: { min: 1, max: 4 } },
    "no-faults": { ...common, seeds: [1], processes: 3, sections: 30, keys: 1 },
    memory: { ...common, seeds: [1], tasks: 50, sections: 4, keys: 2 },
    "long-section": { ...longSection, seeds: [1], contenders: 2, warmup: 5 },
    "holder-killed": { ...holderKilled, seeds: [1], contenders: 2, warmup: 5 },
    "holder-paused": { ...holderPaused, seeds: [1], contenders: 2, warmup: 5 },
    "loop-blocked": { ...loopBlocked, seeds: [1], contenders: 2, warmup: 5 },
  },
};

/** The parameters of `scenarioId` in `profile`; throws when either is unknown. */
export function paramsFor(profile, scenarioId) {
  const table = PROFILES[profile];
  if (table === undefined) throw new Error(`unknown profile "${profile}"; known: ${Object.keys(PROFILES).join(", ")}`);
  const params = table[scenarioId];
  if (params === undefined) throw new Error(`scenario "${scenarioId}" has no parameters in profile "${profile}"`);
  return params;
}
