/**
 * The torture suite as a library, for test/contracts/torture.test.ts (typed by index.d.mts): run one
 * scenario of a profile with one seed, and kill every child process at the end.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { killAllChildren } from "./lib/cleanup.mjs";
import { assertRedisServerInstalled } from "./lib/redis-server.mjs";
import { runScenario } from "./lib/runner.mjs";
import { paramsFor } from "./profiles.mjs";
import { SCENARIOS, scenarioById } from "./scenarios/index.mjs";

/** Scenario ids in report order. */
export const SCENARIO_IDS = SCENARIOS.map((scenario) => scenario.id);

/** Throws a clear message when redis-server is missing or the package has not been built. */
export function assertReady() {
  assertRedisServerInstalled();
  const entry = fileURLToPath(new URL("../dist/esm/index.js", import.meta.url));
  if (!existsSync(entry)) {
    throw new Error("The torture workers import the built package: run `npm run build` first (npm test does).");
  }
}

/** Runs scenario `id` of `profile` once, with `seed` (default: the profile's first seed). */
export async function runProfileScenario(id, profile = "short", seed) {
  const scenario = scenarioById(id);
  const params = paramsFor(profile, id);
  const result = await runScenario(scenario, params, seed ?? params.seeds[0]);
  return { ...result, failures: result.checks.filter((check) => !check.pass) };
}

export { killAllChildren };
