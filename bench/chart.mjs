/**
 * A dependency-free SVG chart of the headline numbers: horizontal bars of (1) uncontended ops/s as
 * a ratio to the raw floor, (2) contended critical sections/s as a fraction of the limit,
 * (3) hand-off latency p50 on a log scale, Redis and in-process, and (4) the acquire + release
 * rate with 10,000 / 100,000 locks held as a ratio to the rate with none held.
 */

const WIDTH = 920;
const LABEL_WIDTH = 300;
const BAR_AREA = WIDTH - LABEL_WIDTH - 90;
const ROW = 20;
const COLORS = ["#3b6fb6", "#e08a2c", "#4a9a5b", "#b5475a", "#7b5ea7", "#8c8c8c"];

const escapeXml = (text) => String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/**
 * One panel of bars.
 * @param {object} panel
 * @param {string} panel.title
 * @param {Array<{ label: string, value: number, text: string, color?: string }>} panel.rows
 * @param {"linear" | "log"} panel.scale
 * @param {number} panel.min axis minimum (log: > 0)
 * @param {number} panel.max axis maximum
 * @param {number[]} panel.ticks
 * @param {(tick: number) => string} panel.tickLabel
 * @param {number} top y offset
 * @returns {{ svg: string, height: number }}
 */
function barPanel({ title, rows, scale, min, max, ticks, tickLabel }, top) {
  const position = (value) => {
    const v = Math.min(Math.max(value, min), max);
    const fraction = scale === "log" ? Math.log10(v / min) / Math.log10(max / min) : (v - min) / (max - min);
    return LABEL_WIDTH + fraction * BAR_AREA;
  };
  const parts = [`<text x="10" y="${top + 16}" class="title">${escapeXml(title)}</text>`];
  const axisTop = top + 28;
  const axisBottom = axisTop + rows.length * ROW + 4;
  for (const tick of ticks) {
    const x = position(tick).toFixed(1);
    parts.push(`<line x1="${x}" y1="${axisTop}" x2="${x}" y2="${axisBottom}" class="grid"/>`);
    parts.push(`<text x="${x}" y="${axisBottom + 13}" class="tick">${escapeXml(tickLabel(tick))}</text>`);
  }
  rows.forEach((row, i) => {
    const y = axisTop + 4 + i * ROW;
    const end = Number.isFinite(row.value) ? position(row.value) : LABEL_WIDTH;
    const color = row.color ?? COLORS[i % COLORS.length];
    parts.push(`<text x="${LABEL_WIDTH - 8}" y="${y + 13}" class="label">${escapeXml(row.label)}</text>`);
    parts.push(
      `<rect x="${LABEL_WIDTH}" y="${y + 2}" width="${Math.max(1, end - LABEL_WIDTH).toFixed(1)}" height="${ROW - 6}" fill="${color}"/>`,
    );
    parts.push(`<text x="${(end + 5).toFixed(1)}" y="${y + 13}" class="value">${escapeXml(row.text)}</text>`);
  });
  return { svg: parts.join("\n"), height: axisBottom + 24 - top };
}

/** Short names for the chart's labels, by contender / variant id. */
const SHORT = {
  raw: "raw floor",
  "raw-grant": "raw direct grant (floor)",
  "raw-wake": "raw wake + SET NX claim",
  globallock: "globallock",
  "globallock-own": "globallock, locker per worker",
  "globallock-shared": "globallock, one shared locker",
  "globallock-per-process": "globallock, locker per process",
  "redlock-0": "redlock (retryCount 0)",
  "redlock-default": "redlock (default retry)",
  "redlock-1ms": "redlock (1 ms retry)",
  "redis-semaphore": "redis-semaphore (1 ms)",
  MemoryLocker: "MemoryLocker",
  "async-mutex": "async-mutex",
  "spin-100ms": "spin lock (100 ms tick)",
};

/** The short label of an id such as "redlock-1ms" or "globallock:remote". */
function shortLabel(id) {
  const [base, where] = id.split(":");
  const name = SHORT[base] ?? base;
  if (where === "local") return `${name}, B same process`;
  if (where === "remote") return `${name}, B other process`;
  return name;
}

const fixed = (digits) => (value) => (Number.isFinite(value) ? value.toFixed(digits) : "–");

/** Milliseconds as a compact label: 0.1 ms, 3 ms, 200 ms. */
function msLabel(ms) {
  if (!Number.isFinite(ms)) return "–";
  if (ms < 0.01) return `${(ms * 1000).toFixed(1)} µs`;
  if (ms < 1) return `${Number(ms.toPrecision(2))} ms`;
  return `${Number(ms.toPrecision(3))} ms`;
}

/**
 * The chart as an SVG document.
 * @param {object} results as assembled by bench/run.mjs
 * @returns {string}
 */
export function renderChart(results) {
  const panels = [];
  if (results.uncontended) {
    const rows = results.uncontended.results.flatMap((r, i) => [
      {
        label: `${shortLabel(r.id)}, sequential`,
        value: r.seqRatio,
        text: `${fixed(2)(r.seqRatio)}×`,
        color: COLORS[i],
      },
      { label: `${shortLabel(r.id)}, 8 keys`, value: r.concRatio, text: `${fixed(2)(r.concRatio)}×`, color: COLORS[i] },
    ]);
    panels.push({
      title: "Uncontended acquire+release, ops/s as a ratio to the raw SET NX + Lua floor",
      rows,
      scale: "linear",
      min: 0,
      max: 1.2,
      ticks: [0, 0.25, 0.5, 0.75, 1],
      tickLabel: (t) => `${t}×`,
    });
  }
  if (results.contended) {
    const rows = [
      ...results.contended.inProcess.map((r) => ({ ...r, where: "1 proc" })),
      ...results.contended.twoProcesses.map((r) => ({ ...r, where: "2 procs" })),
    ].map((r) => ({
      label: `${shortLabel(r.id)} (${r.where})`,
      value: r.fractionOfLimit,
      text: `${Math.round(r.fractionOfLimit * 100)}% · ${Math.round(r.csPerSec)}/s`,
    }));
    panels.push({
      title: "Contended, 8 workers on one key, 1 ms hold: critical sections/s as a fraction of 1000/(hold + t_pair)",
      rows,
      scale: "linear",
      min: 0,
      max: 1.1,
      ticks: [0, 0.25, 0.5, 0.75, 1],
      tickLabel: (t) => `${t * 100}%`,
    });
  }
  const latency = [];
  if (results.handoff) {
    for (const r of results.handoff.results) {
      latency.push({ label: shortLabel(r.id), value: r.p50Ms, text: msLabel(r.p50Ms) });
    }
  }
  if (results.memory) {
    for (const r of results.memory.results) {
      const ms = r.handoffP50Us / 1000;
      latency.push({ label: `${shortLabel(r.id)} (in-process)`, value: ms, text: msLabel(ms) });
    }
  }
  if (latency.length > 0) {
    panels.push({
      title: "Hand-off latency p50: release called → waiter's lock resolves (log scale)",
      rows: latency,
      scale: "log",
      min: 0.001,
      max: 1000,
      ticks: [0.001, 0.01, 0.1, 1, 10, 100, 1000],
      tickLabel: msLabel,
    });
  }
  if (results.held) {
    const rows = results.held.rows
      .filter((r) => r.held > 0)
      .flatMap((r) => {
        const who = r.contender === "globallock" ? "globallock" : "raw floor (control)";
        const held = r.held.toLocaleString("en-US");
        const color = r.contender === "globallock" ? COLORS[0] : COLORS[5];
        return [
          { label: `${who}, ${held} held, sequential`, value: r.seqRatio, text: `${fixed(2)(r.seqRatio)}×`, color },
          { label: `${who}, ${held} held, 8 keys`, value: r.concRatio, text: `${fixed(2)(r.concRatio)}×`, color },
        ];
      });
    panels.push({
      title: "Locks held by the same locker: acquire+release ops/s with N held ÷ with none held",
      rows,
      scale: "linear",
      min: 0,
      max: 1.2,
      ticks: [0, 0.25, 0.5, 0.75, 1],
      tickLabel: (t) => `${t}×`,
    });
  }
  let y = 10;
  const body = panels.map((panel) => {
    const rendered = barPanel(panel, y);
    y += rendered.height + 10;
    return rendered.svg;
  });
  const meta = results.meta;
  const footer = `Node ${meta.node} · Redis ${meta.redis} · ${meta.cpu.model} × ${meta.cpu.count} · pinned: ${meta.pinned ? "yes" : "no"} · ${meta.date}`;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${y + 20}" viewBox="0 0 ${WIDTH} ${y + 20}" font-family="system-ui, sans-serif">`,
    "<style>.title{font-size:14px;font-weight:600}.label{font-size:12px;text-anchor:end}.value{font-size:11px}.tick{font-size:10px;text-anchor:middle;fill:#555}.grid{stroke:#ddd}.foot{font-size:10px;fill:#777}</style>",
    `<rect width="100%" height="100%" fill="#fff"/>`,
    ...body,
    `<text x="10" y="${y + 8}" class="foot">${escapeXml(footer)}</text>`,
    "</svg>",
    "",
  ].join("\n");
}
