/**
 * Number formatting and Markdown table helpers for the report.
 */

/**
 * A number with `digits` significant digits below 1000 and thousands separators above.
 * @param {number} value
 * @param {number} [digits]
 */
export function num(value, digits = 3) {
  if (value === undefined || Number.isNaN(value)) return "–";
  if (!Number.isFinite(value)) return "∞";
  if (Math.abs(value) >= 1000) return Math.round(value).toLocaleString("en-US");
  if (value === 0) return "0";
  return Number(value.toPrecision(digits)).toString();
}

/** An integer with thousands separators. */
export const int = (value) => (Number.isFinite(value) ? Math.round(value).toLocaleString("en-US") : num(value));

/** A ratio like "0.85×". */
export const ratio = (value) => `${num(value, 2)}×`;

/** A fraction as a percentage like "83%". */
export const percent = (value) => (Number.isFinite(value) ? `${Math.round(value * 100)}%` : "–");

/**
 * A Markdown table.
 * @param {string[]} header
 * @param {Array<Array<string | number>>} rows
 * @param {Array<"l" | "r">} [align] per column; numbers default to right
 */
export function table(header, rows, align) {
  const alignment = header.map((_, i) => align?.[i] ?? (i === 0 ? "l" : "r"));
  const line = (cells) => `| ${cells.join(" | ")} |`;
  return [
    line(header),
    line(alignment.map((a) => (a === "r" ? "---:" : ":---"))),
    ...rows.map((row) => line(row.map(String))),
  ].join("\n");
}

/**
 * "evalsha 2.00 · get 1.00 · …" from a per-command map, largest first, omitting tiny entries.
 * @param {Record<string, number>} breakdown
 */
export function breakdown(breakdown) {
  return Object.entries(breakdown)
    .filter(([, count]) => count >= 0.005)
    .map(([name, count]) => `${name} ${count.toFixed(2)}`)
    .join(" · ");
}
