/**
 * The other process of scenario 11's hand-off (bench/scenarios/file.mjs), forked by it: hosts the
 * waiting side B of a file-lock contender. Times are epoch ms (one clock for every process).
 */
import { FILE_CONTENDERS } from "./lib/file-contenders.mjs";
import { serve } from "./lib/rpc.mjs";
import { epochNow } from "./lib/timing.mjs";

/** B sessions by id: { session, pending }. */
const sessions = new Map();

serve({
  clock: () => epochNow(),

  prepare({ sessionId, contenderId, directory }) {
    sessions.set(sessionId, { session: FILE_CONTENDERS[contenderId].open(directory), pending: undefined });
    return "ready";
  },

  /** B calls lock on `key` (held by the parent); answers as soon as the call is made. */
  block({ sessionId, key }) {
    const b = sessions.get(sessionId);
    b.pending = b.session.lock(key).then((release) => ({ release, t1: epochNow() }));
    return "blocking";
  },

  /** Waits for B's lock, releases it, and reports when it was obtained. */
  async acquired({ sessionId }) {
    const b = sessions.get(sessionId);
    const { release, t1 } = await b.pending;
    b.pending = undefined;
    await release();
    return { t1 };
  },

  async closeAll() {
    for (const b of sessions.values()) await b.session.close();
    sessions.clear();
    return "closed";
  },
});
