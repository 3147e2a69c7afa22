/**
 * The worker side of the quorum scenario (scenarios/quorum.mjs): one RedisLocker over clients of
 * five independent redis-servers, taking one key in a loop until the run's section count is
 * reached. Sections are numbered by INCR on a counter of the benchmark's main Redis (not part of
 * the quorum), so that the processes together stop after exactly `total` counted sections.
 *
 * Acquisition attempts are noted from outside: the client of one node that stays up gets an
 * instance-level wrapper of `sendCommand` that notes the time of every EVALSHA/EVAL it sends while
 * this process waits in `lock()`. A failed quorum attempt also sends redlock's release of the
 * partial lock, with another script, so the acquire script is told apart by its SHA: the script
 * whose command came last before each successful `lock()` (the attempt that won).
 */
import { createHash } from "node:crypto";
import { RedisLocker } from "globallock";
import { Redis } from "ioredis";
import { RESILIENT_CLIENT } from "../../support/redis-server.mjs";
import { connectClient } from "./redis-client.mjs";
import { epochNow, epochToLocal, now, sleep, waitUntil } from "./timing.mjs";

const ignore = () => undefined;

/** SHA1 of a script, to name EVAL commands like EVALSHA ones. */
const sha1 = (text) => createHash("sha1").update(String(text)).digest("hex");

/**
 * Opens the quorum locker of this process and warms it (one lock + release).
 * @param {{ ports: number[], observeIndex: number, counterPort: number }} options
 */
export async function openQuorum({ ports, observeIndex, counterPort }) {
  const clients = ports.map((port) => {
    const client = new Redis({ host: "127.0.0.1", port, ...RESILIENT_CLIENT, lazyConnect: true });
    client.on("error", ignore);
    return client;
  });
  await Promise.all(clients.map((client) => client.connect()));
  const counter = await connectClient(counterPort);
  const locker = new RedisLocker(clients);
  const state = { waiting: false, commands: [] };
  const observed = clients[observeIndex];
  const original = observed.sendCommand;
  observed.sendCommand = function notedSendCommand(command, stream) {
    if (state.waiting && stream === undefined) {
      const name = String(command.name).toLowerCase();
      if (name === "evalsha") state.commands.push({ t: epochNow(), sha: String(command.args[0]) });
      else if (name === "eval") state.commands.push({ t: epochNow(), sha: sha1(command.args[0]) });
    }
    return original.call(this, command, stream);
  };
  const release = await locker.lock(undefined, "bench:quorum:warm");
  await release();
  return { clients, counter, locker, state };
}

/** Closes the locker and every client. */
export async function closeQuorum(quorum) {
  await quorum.locker.close();
  for (const client of quorum.clients) client.disconnect();
  quorum.counter.disconnect();
}

/**
 * Takes `key` in a loop from `startAtEpoch`: lock, INCR the section counter, hold `holdMs`
 * (setTimeout), release; stops once the counter passed `total` or at `deadlineEpoch`.
 * @returns {Promise<{ sections: object[], attempts: number[], errors: string[] }>}
 */
export async function runQuorumSections(quorum, { key, countKey, total, holdMs, startAtEpoch, deadlineEpoch }) {
  const { locker, counter, state } = quorum;
  state.commands = [];
  const sections = [];
  const errors = [];
  /** Epoch times at which lock() resolved, with or without a counted section. */
  const grants = [];
  await waitUntil(epochToLocal(startAtEpoch));
  const signal = AbortSignal.timeout(Math.max(1, Math.ceil(epochToLocal(deadlineEpoch) - now())));
  for (;;) {
    const asked = epochNow();
    state.waiting = true;
    let release;
    try {
      release = await locker.lock(signal, key);
    } catch (error) {
      state.waiting = false;
      if (signal.aborted) break;
      errors.push(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
      await sleep(1);
      continue;
    }
    state.waiting = false;
    const got = epochNow();
    grants.push(got);
    const n = await counter.incr(countKey);
    if (n > total) {
      await release();
      break;
    }
    await sleep(holdMs);
    const releaseAt = epochNow();
    await release();
    sections.push({ n, asked, got, releaseAt, releasedAt: epochNow() });
  }
  // The acquire script: the one whose command came last before each grant.
  const votes = new Map();
  for (const grant of grants) {
    const last = state.commands.filter((c) => c.t <= grant).at(-1);
    if (last !== undefined) votes.set(last.sha, (votes.get(last.sha) ?? 0) + 1);
  }
  const acquireSha = [...votes.entries()].sort((a, b) => b[1] - a[1])[0]?.[0];
  const attempts = state.commands.filter((c) => c.sha === acquireSha).map((c) => c.t);
  return { sections, attempts, errors };
}
