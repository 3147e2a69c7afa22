/**
 * Scenario 1b — no faults, MemoryLocker: one process, many concurrent async tasks on shared keys
 * (fencing on: the memory locker issues rising tokens too). Same verdict as scenario 1.
 */

import { sum } from "../report.mjs";
import { runClean } from "./no-faults.mjs";

export default {
  id: "memory",
  number: "1b",
  title: "no faults (MemoryLocker, async tasks in one process)",
  expected: (p) =>
    `${p.tasks} tasks × ${p.sections} sections, ${p.keys} keys: 0 overlaps, 0 lost updates, 0 stale writes, 0 errors`,
  observed: (results) =>
    `${sum(results, "sections")} sections, overlaps ${sum(results, "overlaps")}, lost updates ${sum(results, "lostUpdates")}, ` +
    `stale writes ${sum(results, "staleWrites")}, errors ${sum(results, "errors")}`,

  async run(ctx, p, _seed, checks) {
    const keys = Array.from({ length: p.keys }, (_, i) => `k${i}`);
    const settings = { mode: "memory", fencing: true, tasks: p.tasks };
    return (await runClean(ctx, p, checks, { count: 1, keys, settings })).clean;
  },
};
