/**
 * Runs one scenario once (one seed, one set of parameters): sets up a {@link RunContext}, runs
 * the scenario's body within its time budget, applies the common end-of-run checks, and always
 * tears everything down. Never throws: errors and timeouts become failed checks.
 */

import { Checks } from "./checks.mjs";
import { now, within } from "./clock.mjs";
import { RunContext } from "./run-context.mjs";

/**
 * @param {{ id: string, lockNodes?: (params: object) => number, run: Function }} scenario
 * @param {object} params the profile's parameters for this scenario
 * @param {number} seed
 * @returns {Promise<{ scenario: string, seed: number, pass: boolean, durationMs: number,
 *   checks: object[], metrics: object }>}
 */
export async function runScenario(scenario, params, seed) {
  const checks = new Checks();
  const ctx = new RunContext({ scenario: scenario.id, seed, lockNodes: scenario.lockNodes?.(params) ?? 1 });
  const startedAt = now();
  let metrics = {};
  try {
    await ctx.start();
    const body = scenario.run(ctx, params, seed, checks);
    body.catch(() => undefined); // settles after a timeout too; never unhandled
    metrics = (await within(body, params.timeoutMs, `scenario ${scenario.id}`)) ?? {};
  } catch (error) {
    checks.fail("run completed", "no error", error?.stack ?? String(error));
  } finally {
    await ctx.teardown(checks);
  }
  return {
    scenario: scenario.id,
    seed,
    pass: checks.passed,
    durationMs: Math.round(now() - startedAt),
    checks: checks.list,
    metrics,
  };
}
