/**
 * Scenario 10 — the lock server's script cache is flushed (`SCRIPT FLUSH`, at seeded intervals of
 * 50–200 ms) while several processes, two tasks each, contend for one key and often give up
 * waiting: a seeded share of attempts get a short AbortSignal timeout (a few ms), so waiters leave
 * the cross-process grant queue all the time — while waiting, and while an attempt is in flight
 * (whose EVALSHA may meet NOSCRIPT and be re-sent as EVAL). A flushed cache must neither reorder
 * what a locker sends (a leave overtaken by the attempt it follows, a release overtaking a leave)
 * nor break exclusion.
 *
 * "No key kept for a waiter that has left" is checked twice, without relying on how the hand-off
 * works inside (it has changed more than once):
 *
 * - under contention, the parent samples every millisecond, directly, the referee's holders (before
 *   and after) and the lock key: a key with a value while nobody is inside is unavailable to
 *   everyone though nobody holds it. A hand-off makes such a gap for a moment (the next holder
 *   learns of its turn and enters); a key handed to, or kept for, a waiter that has left makes it
 *   for a whole hand-off grace (250 ms). The longest gap must stay under `unavailableBoundMs`;
 * - several times per run the parent pauses every task and waits until each has acknowledged
 *   (nobody holds the key, nobody waits for it), then reads the key and its grant queue every
 *   few ms for `settleMs` (operationTimeout, the longest a clean-up can still be in flight, plus
 *   the grace, plus a margin). With nobody waiting, the queue must be empty and the key free by
 *   then: a queued id is a waiter that left but stayed queued (a later release would hand it the
 *   key), a value a key kept for nobody.
 *
 * Besides: C1, C2 and C3; no lock key left at the end (the check that caught the pre-fix build's
 * reordered clean-up: a late grant released before the re-sent attempt that made it); attempts
 * with the long timeout all succeed, none waiting longer than `waitBoundMs` (one lease: sections
 * take milliseconds here; before 020c965 a process could be starved for seconds by another that
 * handed the key between its own tasks, repro/two-task-starvation.mjs); only the short abort
 * timeouts as errors.
 */
import { checkNoLostUpdates, checkNoOverlap } from "../lib/checks.mjs";
import { now, sleep } from "../lib/clock.mjs";
import { deriveSeed, Prng } from "../lib/prng.mjs";
import { range, sum } from "../report.mjs";

export default {
  id: "script-flush",
  number: "10",
  title: "SCRIPT FLUSH every 50–200 ms under contention, waiters aborting",
  expected: (p) =>
    `${p.processes} proc × ${p.tasks} tasks on 1 key, ${Math.round(p.abortWaits.chance * 100)}% of waits aborted ` +
    `after ${p.abortWaits.minMs}–${p.abortWaits.maxMs} ms; with nobody waiting, key free and grant queue empty ` +
    `within ${p.settleMs} ms (no key kept for a waiter that left); every long wait granted within ${p.waitBoundMs} ms; ` +
    "0 overlaps, 0 lost updates, 0 stale writes accepted",
  observed: (results) =>
    `${sum(results, "flushes")} flushes, ${sum(results, "noscript")} NOSCRIPT replies; ${sum(results, "sections")} ` +
    `sections, ${sum(results, "abortedWaits")} waits aborted; under contention a key nobody held stayed ` +
    `unavailable ≤ ${range(results, "maxUnavailableMs")} (${sum(results, "unavailableSamples")} of ` +
    `${sum(results, "contentionSamples")} direct samples); ${sum(results, "probes")} quiet probes: key/queue clear ` +
    `after ${range(results, "maxBusyMs")} (worst), key values seen ${sum(results, "valuesSeen")}, left after ` +
    `settle: ${sum(results, "leftoverProbes")}; long waits not granted ${sum(results, "longWaitsFailed")} (longest ` +
    `granted ${range(results, "longestWaitMs")}); other errors ${sum(results, "otherErrors")}; overlaps ` +
    `${sum(results, "overlaps")}, lost updates ${sum(results, "lostUpdates")}, stale writes accepted ` +
    `${sum(results, "staleAccepted")}`,

  async run(ctx, p, seed, checks) {
    const keys = ["k0"];
    const admin = ctx.lockAdmins[0];
    const workers = await ctx.startWorkers(p.processes, {
      keys,
      tasks: p.tasks,
      hold: p.hold,
      expiry: p.expiry,
      backoffMax: p.backoffMax,
      abortWaits: p.abortWaits,
      acquireTimeoutMs: p.acquireTimeoutMs,
      errorRetryMs: p.errorRetryMs,
    });
    const noscriptBefore = await noscriptReplies(admin);
    ctx.pool.go();
    const sampler = new UnavailabilitySampler(ctx, "k0", p.sampleEveryMs);
    sampler.start();

    const rng = new Prng(deriveSeed(seed, "flusher"));
    let flushing = true;
    let stopFlushing = () => undefined;
    const stopped = new Promise((resolve) => {
      stopFlushing = resolve;
    });
    let flushes = 0;
    const flusher = (async () => {
      while (flushing) {
        await Promise.race([sleep(rng.int(p.flushEveryMs.min, p.flushEveryMs.max)), stopped]);
        if (!flushing) break;
        await admin.script("FLUSH");
        flushes += 1;
      }
    })();
    const probes = [];
    try {
      for (let i = 0; i < p.probes; i++) {
        await sleep(p.contentionMs);
        sampler.active = false; // nobody is inside during a probe by design
        probes.push(await quietProbe(ctx, workers, p));
        sampler.active = true;
      }
    } finally {
      flushing = false;
      stopFlushing();
      await flusher.catch(() => undefined);
      await sampler.stop();
    }
    const noscript = (await noscriptReplies(admin)) - noscriptBefore;
    const history = await ctx.finish(checks, keys);

    checks.atLeast("the cache was flushed (the scenario is not vacuous)", flushes, p.probes);
    checks.atLeast("EVALSHA met NOSCRIPT", noscript, p.probes);
    const events = ctx.pool.events;
    const errors = events.filter((e) => e.type === "acquireError");
    const aborted = errors.filter((e) => e.code === "TimeoutError" && e.timeoutMs < p.acquireTimeoutMs);
    const longFailed = errors.filter((e) => e.timeoutMs >= p.acquireTimeoutMs);
    const granted = events.filter((e) => e.type === "acquired" && e.timeoutMs >= p.acquireTimeoutMs);
    const other = errors.filter((e) => !aborted.includes(e) && !longFailed.includes(e));
    checks.atLeast("waits aborted (waiters leave the queue often)", aborted.length, p.probes * p.processes);
    checks.add(
      "every wait with the long timeout was granted",
      longFailed.length === 0,
      "0 failed",
      longFailed.length === 0 ? "0 failed" : `${longFailed.length}: ${longFailed[0].code} ${longFailed[0].message}`,
    );
    const longestWaitMs = Math.max(0, ...granted.map((e) => e.t - e.startedAt));
    checks.atMost(
      "every long wait granted within the bound (no process starved)",
      Math.round(longestWaitMs),
      p.waitBoundMs,
      " ms",
    );
    checks.add(
      "no error other than the short abort timeouts",
      other.length === 0,
      "0",
      other.length === 0 ? "0" : `${other.length}: ${other[0].code} ${other[0].message}`,
    );
    const leftovers = probes.filter((probe) => probe.left.length > 0);
    checks.add(
      "with nobody waiting, key free and grant queue empty after the settle time",
      leftovers.length === 0,
      `clear within ${p.settleMs} ms at every probe`,
      leftovers.length === 0
        ? `clear at ${probes.length}/${probes.length} probes`
        : `${leftovers.length} of ${probes.length} probes: ${leftovers[0].left.join(", ")}`,
    );
    checks.equal("quiet probes made", probes.length, p.probes);
    const worst = sampler.worst();
    checks.atLeast(
      "contention samples taken (key and referee, directly)",
      sampler.samples,
      p.samplesPerProbe * p.probes,
    );
    checks.atMost(
      "a key nobody holds never stays unavailable (while others wait) longer than the bound",
      Math.round(worst?.ms ?? 0),
      p.unavailableBoundMs,
      " ms",
    );
    checkNoOverlap(checks, history);
    checkNoLostUpdates(checks, history);
    const sectionsDone = events.filter((e) => e.type === "released").length;
    checks.atLeast("sections completed", sectionsDone, p.probes * p.processes);
    return {
      flushes,
      noscript,
      sections: history.completed,
      abortedWaits: aborted.length,
      longWaitsFailed: longFailed.length,
      longestWaitMs,
      otherErrors: other.length,
      probes: probes.length,
      contentionSamples: sampler.samples,
      unavailableSamples: sampler.unavailable,
      maxUnavailableMs: worst?.ms ?? 0,
      worstUnavailable: worst === undefined ? undefined : `${Math.round(worst.ms)} ms, key=${worst.value}`,
      maxBusyMs: Math.max(0, ...probes.map((probe) => probe.busyMs)),
      valuesSeen: probes.reduce((n, probe) => n + probe.valuesSeen, 0),
      leftoverProbes: leftovers.length,
      overlaps: history.overlaps.length,
      lostUpdates: history.lostUpdates,
      staleAccepted: history.fenced.staleAccepted,
    };
  },
};

/**
 * Pauses every task, waits until each has acknowledged (no attempt or section under way in any
 * process), then watches the key and its grant queue for `settleMs`; resumes the workers.
 * Returns how long after the last acknowledgement anything was still there (`busyMs`), how many
 * reads saw a value in the key, and what was left at the end (`left`, empty when all clear).
 */
async function quietProbe(ctx, workers, p) {
  const pausedAt = now();
  ctx.pool.broadcast({ type: "pause" });
  const acknowledged = () =>
    workers.every((w) => w.events.filter((e) => e.type === "paused" && e.receivedAt > pausedAt).length >= p.tasks);
  await ctx.pool.waitForEvent(acknowledged, 10 * p.acquireTimeoutMs, "every task paused");
  const quietAt = now();
  const lock = `${ctx.prefix}k0`;
  const queue = `{${lock}}:queue`;
  const waiters = `{${lock}}:waiters`;
  let busyUntil = quietAt;
  let valuesSeen = 0;
  let state;
  for (;;) {
    const [[, value], [, queued], [, live]] = await ctx.lockAdmins[0]
      .multi()
      .get(lock)
      .zrange(queue, 0, -1)
      .hkeys(waiters)
      .exec();
    state = { value, queued, live };
    const t = now();
    if (value !== null || queued.length > 0 || live.length > 0) busyUntil = t;
    if (value !== null) valuesSeen += 1;
    if (t - quietAt >= p.settleMs) break;
    await sleep(p.probeEveryMs);
  }
  const left = [];
  if (state.value !== null) left.push(`key=${state.value}`);
  if (state.queued.length > 0) left.push(`queue=[${state.queued.join(",")}]`);
  if (state.live.length > 0) left.push(`waiters=[${state.live.join(",")}]`);
  ctx.log(`quiet probe: busy ${Math.round(busyUntil - quietAt)} ms, left ${left.join(" ") || "nothing"}`);
  ctx.pool.broadcast({ type: "resume" });
  return { busyMs: busyUntil - quietAt, valuesSeen, left };
}

/**
 * Samples, during contention, whether the key is unavailable although nobody holds it: the referee
 * says nobody is inside (read before and after) while the key has a value (read directly in
 * between). A hand-off leaves such a gap for a moment (the next holder learns of its grant and
 * enters); a key handed to, or kept for, a waiter that has left leaves it for a whole hand-off
 * grace. Consecutive unavailable samples make one stretch; `worst()` is the longest.
 */
class UnavailabilitySampler {
  active = true;
  samples = 0;
  unavailable = 0;
  #stretches = [];
  #open;
  #running = false;
  #loop;

  constructor(ctx, key, everyMs) {
    this.ctx = ctx;
    this.key = key;
    this.everyMs = everyMs;
  }

  start() {
    this.#running = true;
    this.#loop = (async () => {
      while (this.#running) {
        if (this.active) await this.#sample();
        else this.#close();
        await sleep(this.everyMs);
      }
    })();
  }

  async #sample() {
    const before = await this.ctx.referee.holders(this.key);
    const value = await this.ctx.lockAdmins[0].get(`${this.ctx.prefix}${this.key}`);
    const after = await this.ctx.referee.holders(this.key);
    const t = now();
    this.samples += 1;
    if (Object.keys(before).length === 0 && Object.keys(after).length === 0 && value !== null) {
      this.unavailable += 1;
      if (this.#open === undefined) this.#open = { from: t, to: t, value };
      else this.#open.to = t;
    } else {
      this.#close();
    }
  }

  #close() {
    if (this.#open !== undefined) this.#stretches.push(this.#open);
    this.#open = undefined;
  }

  async stop() {
    this.#running = false;
    await this.#loop?.catch(() => undefined);
    this.#close();
  }

  /** The longest stretch: { ms, value } (undefined when there was none). */
  worst() {
    let worst;
    for (const s of this.#stretches)
      if (worst === undefined || s.to - s.from > worst.ms) worst = { ms: s.to - s.from, value: s.value };
    return worst;
  }
}

/** NOSCRIPT error replies the server has sent so far (INFO errorstats). */
async function noscriptReplies(admin) {
  const info = await admin.info("errorstats");
  return Number(/errorstat_NOSCRIPT:count=(\d+)/.exec(info)?.[1] ?? 0);
}
