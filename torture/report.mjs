/**
 * Turns run results into the results table (Markdown) and the JSON record, and writes both to
 * torture/results/. One row per scenario: what was expected, what was observed over all its runs,
 * how many runs (and seeds), and the verdict (PASS only if every check of every run passed).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** Sum of a numeric metric over runs (missing counts as 0). */
export function sum(results, metric) {
  return results.reduce((total, r) => total + (Number(r.metrics?.[metric]) || 0), 0);
}

/** "min–max" of a numeric metric over runs, rounded, or "n/a". */
export function range(results, metric, unit = " ms") {
  const values = results.map((r) => r.metrics?.[metric]).filter((v) => Number.isFinite(v));
  if (values.length === 0) return "n/a";
  const low = Math.round(Math.min(...values));
  const high = Math.round(Math.max(...values));
  return low === high ? `${low}${unit}` : `${low}–${high}${unit}`;
}

/** Escapes a table cell. */
function cell(text) {
  return String(text).replaceAll("|", "\\|").replaceAll("\n", " ");
}

/**
 * One row per scenario.
 * @param {{ scenario: object, params: object, results: object[] }[]} rows
 */
export function toMarkdown(rows, { profile, startedAt, durationMs }) {
  const lines = [
    `# globallock torture results (${profile} profile)`,
    "",
    `Run ${new Date(startedAt).toISOString()}, ${Math.round(durationMs / 1000)} s, Node ${process.version}.`,
    "",
    "| scenario | expected | observed | runs | verdict |",
    "| --- | --- | --- | --- | --- |",
  ];
  for (const { scenario, params, results } of rows) {
    const failed = results.filter((r) => !r.pass);
    const seeds = results.map((r) => r.seed).join(", ");
    const verdict = failed.length === 0 ? "PASS" : `**FAIL** (${failed.length}/${results.length})`;
    lines.push(
      `| ${cell(`${scenario.number}. ${scenario.title}`)} | ${cell(scenario.expected(params))} | ` +
        `${cell(scenario.observed(results, params))} | ${results.length} (seeds ${seeds}) | ${verdict} |`,
    );
  }
  const failures = rows.flatMap(({ scenario, results }) =>
    results.flatMap((r) =>
      r.checks
        .filter((c) => !c.pass)
        .map(
          (c) =>
            `- ${scenario.number}. ${scenario.id}, seed ${r.seed}: **${c.name}** — expected ${c.expected}, observed ${c.observed}`,
        ),
    ),
  );
  if (failures.length > 0) lines.push("", "## Failed checks", "", ...failures);
  return `${lines.join("\n")}\n`;
}

/**
 * JSON laid out the way the repository's formatter (Biome, line width 120) lays it out, so that the
 * results file passes `biome check`: objects one member per line; arrays of plain values on one
 * line when they fit, else one item per line.
 */
export function formatJson(value, indent = "", key = "") {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  const inner = `${indent}  `;
  if (Array.isArray(value)) {
    if (value.length === 0) return "[]";
    const flat = value.every((item) => item === null || typeof item !== "object");
    const oneLine = `[${value.map((item) => JSON.stringify(item) ?? "null").join(", ")}]`;
    if (flat && indent.length + key.length + oneLine.length + 1 <= 120) return oneLine;
    return `[\n${value.map((item) => inner + formatJson(item, inner)).join(",\n")}\n${indent}]`;
  }
  const entries = Object.entries(value).filter(([, v]) => v !== undefined);
  if (entries.length === 0) return "{}";
  const lines = entries.map(([k, v]) => {
    const name = `${JSON.stringify(k)}: `;
    return `${inner}${name}${formatJson(v, inner, name)}`;
  });
  return `{\n${lines.join(",\n")}\n${indent}}`;
}

/** Writes `latest.md` and `latest.json` under torture/results/ and returns their paths. */
export function writeResults(markdown, record) {
  const dir = fileURLToPath(new URL("./results/", import.meta.url));
  mkdirSync(dir, { recursive: true });
  const md = `${dir}latest.md`;
  const json = `${dir}latest.json`;
  writeFileSync(md, markdown);
  writeFileSync(json, `${formatJson(record)}\n`);
  return { md, json };
}
