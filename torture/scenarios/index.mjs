/** Every scenario, in report order. */
import control from "./control.mjs";
import holderKilled from "./holder-killed.mjs";
import holderPaused from "./holder-paused.mjs";
import longSection from "./long-section.mjs";
import loopBlocked from "./loop-blocked.mjs";
import memory from "./memory.mjs";
import noFaults from "./no-faults.mjs";

export const SCENARIOS = [control, noFaults, memory, longSection, holderKilled, holderPaused, loopBlocked];

/** The scenario with this id; throws on an unknown id. */
export function scenarioById(id) {
  const scenario = SCENARIOS.find((s) => s.id === id);
  if (scenario === undefined)
    throw new Error(`unknown scenario "${id}"; known: ${SCENARIOS.map((s) => s.id).join(", ")}`);
  return scenario;
}
