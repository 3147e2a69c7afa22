/**
 * A FileLocker in a child process, driven over IPC by test/helpers/remote-locker.ts (so that a
 * contract test's "peer" really is another process). It imports the BUILT package.
 *
 * Parent → child: { op: "open", options, view? } | { op: "acquire", id, key, options, wait } |
 *   { op: "abort", id } | { op: "release", id } | { op: "close" } | { op: "raceAt", id, key, at }
 *   | { op: "clock", id } | { op: "waiting", id } | { op: "handOff", id } | { op: "adopt", id, handle,
 *   options } | { op: "inspect", id, key } (raceAt: spin until epoch ms `at`, one tryAcquire;
 *   a lease won is kept under `id`; clock: the child's Date.now(), as `now`; waiting: its
 *   locker's waitingCount; handOff: the handle of lease `id`; adopt: a lease kept under `id`;
 *   inspect: its LockInfo, fencing tokens as strings)
 * Child → parent: { id, ok, lease?: { token, fencingToken? } | null, outcome?, now?, waiting?, handle?,
 *   info?, error? } and { event: "lost", id, reason }
 */
import { FileLocker, FileReadWriteLocker } from "globallock";

let locker;
/** Requests in flight by id: their AbortController. */
const pending = new Map();
/** Leases held by id. */
const leases = new Map();

const reply = (message) => process.send?.(message);
const describe = (error) => ({ name: error?.name, code: error?.code, message: String(error?.message ?? error) });

process.on("disconnect", () => process.exit(0));

/** Keeps `lease` under `id`, reporting its loss. */
function keep(id, lease) {
  leases.set(id, lease);
  lease.lost.addEventListener("abort", () => reply({ event: "lost", id, reason: lease.lost.reason?.reason }));
}
process.on("message", async (message) => {
  switch (message.op) {
    case "open":
      // view: "read" or "write" for a view of a FileReadWriteLocker, else a FileLocker.
      locker =
        message.view === undefined
          ? new FileLocker(message.options)
          : new FileReadWriteLocker(message.options)[message.view];
      reply({ id: message.id, ok: true, pid: process.pid });
      break;
    case "acquire": {
      const controller = new AbortController();
      pending.set(message.id, controller);
      try {
        const lease = message.wait
          ? await locker.acquire(controller.signal, message.key, message.options)
          : await locker.tryAcquire(controller.signal, message.key, message.options);
        pending.delete(message.id);
        if (lease === undefined) {
          reply({ id: message.id, ok: true, lease: null });
          break;
        }
        keep(message.id, lease);
        reply({ id: message.id, ok: true, lease: { fencingToken: lease.fencingToken?.toString() } });
      } catch (error) {
        pending.delete(message.id);
        reply({ id: message.id, ok: false, error: describe(error) });
      }
      break;
    }
    case "handOff":
      try {
        reply({ id: message.id, ok: true, handle: await leases.get(message.id).handOff() });
      } catch (error) {
        reply({ id: message.id, ok: false, error: describe(error) });
      }
      break;
    case "adopt":
      try {
        const lease = await locker.adopt(undefined, message.handle, message.options);
        keep(message.id, lease);
        reply({ id: message.id, ok: true, lease: { fencingToken: lease.fencingToken?.toString(), key: lease.key } });
      } catch (error) {
        reply({ id: message.id, ok: false, error: describe(error) });
      }
      break;
    case "inspect":
      try {
        const info = await locker.inspect(undefined, message.key);
        const holders = info.holders.map((holder) => ({ ...holder, fencingToken: holder.fencingToken?.toString() }));
        reply({ id: message.id, ok: true, info: { ...info, holders } });
      } catch (error) {
        reply({ id: message.id, ok: false, error: describe(error) });
      }
      break;
    case "abort":
      pending.get(message.id)?.abort(new Error("aborted by the parent"));
      break;
    case "release": {
      const lease = leases.get(message.id);
      leases.delete(message.id);
      reply({ id: message.id, ok: true, outcome: lease === undefined ? "released" : await lease.releaseWithOutcome() });
      break;
    }
    case "raceAt": {
      // Spin until the shared epoch time, then one attempt: stale-lock stealers start together.
      while (performance.timeOrigin + performance.now() < message.at) {
        // busy-wait
      }
      const before = locker.stats.lostTakeoverRaces;
      try {
        // A winner holds on until the parent releases it (op "release" with the same id).
        const lease = await locker.tryAcquire(undefined, message.key);
        const won = lease !== undefined;
        if (won) leases.set(message.id, lease);
        reply({ id: message.id, ok: true, won, lostRace: locker.stats.lostTakeoverRaces > before });
      } catch (error) {
        reply({ id: message.id, ok: false, error: describe(error) });
      }
      break;
    }
    case "clock":
      // The child's wall clock (stepped by libfaketime in the clock tests).
      reply({ id: message.id, ok: true, now: Date.now() });
      break;
    case "waiting":
      reply({ id: message.id, ok: true, waiting: locker.waitingCount });
      break;
    case "close":
      for (const controller of pending.values()) controller.abort(new Error("closing"));
      await locker?.close();
      reply({ id: message.id, ok: true });
      break;
  }
});
process.send?.({ event: "ready" });
