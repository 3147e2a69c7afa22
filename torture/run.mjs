#!/usr/bin/env node
/**
 * `npm run torture` — runs every scenario of a profile with its seed list, prints the Markdown
 * results table, writes torture/results/latest.md and latest.json, and exits non-zero if any
 * verdict fails.
 *
 *   node torture/run.mjs                         # full profile (the default)
 *   node torture/run.mjs --profile short         # the short profile that `npm test` runs
 *   node torture/run.mjs --only holder-paused,redis-restart --seeds 7
 *
 * Needs `npm run build` first (workers import the built package) and redis-server on PATH; the
 * etcd scenarios need etcd (they pass with a SKIP check without it).
 */
import { parseArgs } from "node:util";
import { installSignalHandlers, killAllChildren } from "./lib/cleanup.mjs";
import { now } from "./lib/clock.mjs";
import { assertRedisServerInstalled } from "./lib/redis-server.mjs";
import { runScenario } from "./lib/runner.mjs";
import { inProfile, paramsFor } from "./profiles.mjs";
import { toMarkdown, writeResults } from "./report.mjs";
import { SCENARIOS, scenarioById } from "./scenarios/index.mjs";

const { values } = parseArgs({
  options: {
    profile: { type: "string", default: "full" },
    only: { type: "string" },
    seeds: { type: "string" },
    "no-write": { type: "boolean", default: false },
  },
});

installSignalHandlers();
assertRedisServerInstalled();

// Without --only: the profile's scenarios (the short one leaves out those it has no parameters for).
const scenarios = values.only
  ? values.only.split(",").map((id) => scenarioById(id.trim()))
  : SCENARIOS.filter((scenario) => inProfile(values.profile, scenario.id));
const seedOverride = values.seeds?.split(",").map(Number);
const startedAt = Date.now();
const t0 = now();
const rows = [];
try {
  for (const scenario of scenarios) {
    const params = paramsFor(values.profile, scenario.id);
    const results = [];
    for (const seed of seedOverride ?? params.seeds) {
      process.stdout.write(`${scenario.number}. ${scenario.id} seed ${seed} … `);
      const result = await runScenario(scenario, params, seed);
      results.push(result);
      process.stdout.write(`${result.pass ? "pass" : "FAIL"} (${(result.durationMs / 1000).toFixed(1)} s)\n`);
      for (const check of result.checks.filter((c) => !c.pass)) {
        process.stdout.write(`    ✗ ${check.name}: expected ${check.expected}, observed ${check.observed}\n`);
      }
    }
    rows.push({ scenario, params, results });
  }
} finally {
  killAllChildren();
}

const durationMs = now() - t0;
const markdown = toMarkdown(rows, { profile: values.profile, startedAt, durationMs });
process.stdout.write(`\n${markdown}`);
if (!values["no-write"]) {
  const record = {
    profile: values.profile,
    startedAt: new Date(startedAt).toISOString(),
    durationMs: Math.round(durationMs),
    node: process.version,
    scenarios: rows.map(({ scenario, params, results }) => ({
      id: scenario.id,
      number: scenario.number,
      title: scenario.title,
      expected: scenario.expected(params),
      observed: scenario.observed(results, params),
      params,
      pass: results.every((r) => r.pass),
      runs: results,
    })),
  };
  const { md } = writeResults(markdown, record);
  process.stdout.write(`\nwritten: ${md} (+ latest.json)\n`);
}
process.exitCode = rows.every(({ results }) => results.every((r) => r.pass)) ? 0 : 1;
