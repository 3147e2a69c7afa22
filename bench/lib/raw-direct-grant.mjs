/**
 * Two raw hand-off floors for scenario 4, each the least a Redis lock can do to hand a key from a
 * releasing holder to a blocked waiter, written with ioredis and Lua for this benchmark only. Both
 * implement the Contender interface of ./redis-contenders.mjs. Neither has the safety nets a
 * library needs (liveness of queued waiters, lost messages, crashed holders…) beyond a give-up
 * bound that keeps the benchmark from hanging.
 *
 * - raw direct grant (`raw-grant`): a waiter that finds the key taken registers its token in the
 *   key's queue (RPUSH, in the same script as the failed SET NX, so a release cannot slip between
 *   them). Each session is subscribed, from the start, to its own channel. The holder's release
 *   script pops the next waiter, SETs the key to that waiter's token with the lease TTL and
 *   PUBLISHes the token on the waiter's channel; the waiter treats the message as ownership, with
 *   no claim round trip. Hand-off ≈ one round trip (the release) plus delivery.
 * - raw wake then claim (`raw-wake`): release is compare-and-delete plus PUBLISH on the key's
 *   channel in one script; a waiter subscribes to that channel (once per key, kept), and on a
 *   message claims the key with SET NX. Hand-off ≈ two round trips (release, then the claim).
 */
import { randomBytes } from "node:crypto";
import { LEASE_MS } from "./raw-floor.mjs";
import { connectClient } from "./redis-client.mjs";
import { now, settleWithin } from "./timing.mjs";

/** A waiter gives up after this long (ms): a bound for the benchmark, not a feature. */
const GIVE_UP_MS = 10_000;
/** raw-wake re-tries after this long without a message (a bound; never reached when all works). */
const SAFETY_RETRY_MS = 1000;
/** Prefix of the per-session grant channels of raw-grant. */
const GRANT_CHANNEL = "bench:grant:";

/** Take the key, or join its queue. KEYS: lock, queue. ARGV: token, ttl. 1 = taken, 0 = queued. */
const GRANT_ACQUIRE = `
if redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then return 1 end
redis.call("rpush", KEYS[2], ARGV[1])
redis.call("pexpire", KEYS[2], ARGV[2])
return 0
`;

/**
 * Release and grant: hand the key to the queue's next token (SET with TTL + PUBLISH on its
 * session's channel), else delete it. KEYS: lock, queue. ARGV: token, ttl, channel prefix.
 */
const GRANT_RELEASE = `
if redis.call("get", KEYS[1]) ~= ARGV[1] then return 0 end
local waiter = redis.call("lpop", KEYS[2])
if waiter then
  redis.call("set", KEYS[1], waiter, "PX", ARGV[2])
  redis.call("publish", ARGV[3] .. string.match(waiter, "^[^.]+"), waiter)
  return 2
end
redis.call("del", KEYS[1])
return 1
`;

/** Leave the queue (giving up). KEYS: queue. ARGV: token. Returns how many entries were removed. */
const GRANT_LEAVE = `return redis.call("lrem", KEYS[1], 1, ARGV[1])`;

/** Compare-and-delete that publishes on the key's channel. KEYS: lock. ARGV: token. */
const WAKE_RELEASE = `
if redis.call("get", KEYS[1]) == ARGV[1] then
  redis.call("del", KEYS[1])
  redis.call("publish", KEYS[1], "")
  return 1
end
return 0
`;

const ignore = () => undefined;

/** A subscriber connection duplicated from `client`, errors reported by the main client's handler. */
function subscriberOf(client) {
  const subscriber = client.duplicate();
  subscriber.on("error", ignore);
  return subscriber;
}

/** @type {import("./redis-contenders.mjs").Contender} */
export const rawDirectGrant = {
  id: "raw-grant",
  label: "raw direct grant (floor): RPUSH waiter, release SETs key to it + PUBLISH",
  async open(port) {
    const client = await connectClient(port);
    const subscriber = subscriberOf(client);
    const session = randomBytes(8).toString("hex");
    /** Resolvers of the grants this session waits for, by token. */
    const pending = new Map();
    subscriber.on("message", (_channel, token) => {
      const grant = pending.get(token);
      if (grant === undefined) return;
      pending.delete(token);
      grant();
    });
    await subscriber.subscribe(GRANT_CHANNEL + session);
    const [acquireSha, releaseSha, leaveSha] = await Promise.all(
      [GRANT_ACQUIRE, GRANT_RELEASE, GRANT_LEAVE].map((script) => client.script("LOAD", script)),
    );
    let sequence = 0;
    return {
      async lock(key) {
        const token = `${session}.${(sequence++).toString(36)}`;
        const queue = `${key}:queue`;
        // Listen before asking: the grant may arrive before the reply to the acquire script.
        const granted = new Promise((resolve) => pending.set(token, resolve));
        const release = () => client.evalsha(releaseSha, 2, key, queue, token, LEASE_MS, GRANT_CHANNEL).then(ignore);
        if ((await client.evalsha(acquireSha, 2, key, queue, token, LEASE_MS)) === 1) {
          pending.delete(token);
          return release;
        }
        if (
          await settleWithin(
            granted.then(() => true),
            GIVE_UP_MS,
            false,
          )
        )
          return release;
        if ((await client.evalsha(leaveSha, 1, queue, token)) === 1) {
          pending.delete(token);
          return undefined;
        }
        await granted; // popped meanwhile: the grant is on its way
        return release;
      },
      async close() {
        subscriber.disconnect();
        client.disconnect();
      },
    };
  },
};

/** @type {import("./redis-contenders.mjs").Contender} */
export const rawWakeClaim = {
  id: "raw-wake",
  label: "raw wake then claim (floor): release DEL + PUBLISH, waiter SET NX",
  async open(port) {
    const client = await connectClient(port);
    const subscriber = subscriberOf(client);
    /** Resolvers waiting for the next message on a channel, by channel. */
    const listeners = new Map();
    const subscribed = new Set();
    subscriber.on("message", (channel) => {
      const waiting = listeners.get(channel);
      if (waiting === undefined) return;
      listeners.delete(channel);
      for (const wake of waiting) wake();
    });
    /** The next message on `channel` (listening starts now). */
    const nextMessage = (channel) => {
      let wake;
      const promise = new Promise((resolve) => {
        wake = resolve;
      });
      if (!listeners.has(channel)) listeners.set(channel, new Set());
      listeners.get(channel).add(wake);
      return { promise, cancel: () => listeners.get(channel)?.delete(wake) };
    };
    const releaseSha = await client.script("LOAD", WAKE_RELEASE);
    return {
      async lock(key) {
        const token = randomBytes(16).toString("hex");
        const deadline = now() + GIVE_UP_MS;
        for (;;) {
          const woke = nextMessage(key); // before the attempt: a release right after it must wake us
          const reply = await client.set(key, token, "NX", "PX", LEASE_MS);
          if (reply === "OK") {
            woke.cancel();
            return () => client.evalsha(releaseSha, 1, key, token).then(ignore);
          }
          if (!subscribed.has(key)) {
            // First wait on this key: subscribe, then try again (a release may have come first).
            await subscriber.subscribe(key);
            subscribed.add(key);
            woke.cancel();
            continue;
          }
          const left = deadline - now();
          if (left <= 0) {
            woke.cancel();
            return undefined;
          }
          await settleWithin(woke.promise, Math.min(left, SAFETY_RETRY_MS), undefined);
          woke.cancel();
        }
      },
      async close() {
        subscriber.disconnect();
        client.disconnect();
      },
    };
  },
};
