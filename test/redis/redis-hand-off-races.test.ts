/**
 * Grants of the single-node grant queue that reach nobody able to use them, in scripted
 * interleavings: a caller that gives up just as its grant arrives, a grant to a registration its
 * locker does not count on (a late one, from an attempt cut short), and an attempt that timed out
 * here after it had joined the queue in Redis. Each time the key must go on to the next waiter at
 * once, not after the hand-off grace or a liveness window.
 *
 * The next waiter is always a "quiet" locker, which polls only every 30 s: within a test it can get
 * the key by a grant alone, made by a release — never by the key's expiry. So "it holds the key"
 * says that the unusable grant was released, whatever the machine's load.
 */

import type { Command, Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisLocker, type RedisLockerOptions, RedisSemaphore, StoreUnavailableError } from "../../src/index.js";
import { ACQUIRE_PERMITS } from "../../src/redis/permit-scripts.js";
import { ACQUIRE } from "../../src/redis/scripts.js";
import { uniqueKey } from "../contracts/contract.js";
import { RedisFixture } from "../helpers/redis-harness.js";
import { eventually, untilWaiting } from "../helpers/wait.js";

let fixture: RedisFixture;
let admin: Redis;
beforeAll(async () => {
  fixture = await RedisFixture.start(1);
  admin = fixture.admin();
});
afterAll(async () => {
  await fixture?.stop();
});

/** No poll and no extension while a test runs: a waiter gets a key only by a grant. */
const quiet = { expiry: 60_000, backoff: { min: 30_000, max: 30_000 } };
/** How long a waiter of these tests waits at most: a hang becomes a failure before the test timeout. */
const PATIENCE_MS = 15_000;

/** Holds back replies while closed: each settles as it would have, once the gate opens. */
class Gate {
  #opened: Promise<void> | undefined;
  #open: (() => void) | undefined;

  close(): void {
    this.#opened ??= new Promise((resolve) => {
      this.#open = resolve;
    });
  }

  open(): void {
    this.#open?.();
    this.#opened = undefined;
    this.#open = undefined;
  }

  /** `reply`, held back until the gate opens if it is closed now. */
  pass<T>(reply: Promise<T>): Promise<T> {
    const opened = this.#opened;
    if (opened === undefined) return reply;
    return reply.then(
      async (value) => {
        await opened;
        return value;
      },
      async (error: unknown) => {
        await opened;
        throw error;
      },
    );
  }
}

/** The attempt scripts of locks and of counted locks, as EVALSHA or EVAL name them. */
const ATTEMPTS = new Set([ACQUIRE.sha, ACQUIRE.source, ACQUIRE_PERMITS.sha, ACQUIRE_PERMITS.source]);

/**
 * A client whose replies a test holds back while Redis runs the commands as sent: the replies to
 * the locker's attempts (`attempts`), and the confirmations of its subscriber's SUBSCRIBEs
 * (`subscriptions`). `grantHeard(key)` resolves once a grant of `key` reached its subscriber (the
 * locker's own listener has run by then: both run in the same emit).
 */
class ScriptedClient {
  readonly client: Redis;
  readonly attempts = new Gate();
  readonly subscriptions = new Gate();
  readonly #awaited: Array<{ resource: string; heard: () => void }> = [];

  constructor(client: Redis) {
    this.client = client;
    const send = client.sendCommand.bind(client);
    client.sendCommand = (command: Command, stream?: Parameters<Redis["sendCommand"]>[1]) => {
      const reply = send(command, stream) as Promise<unknown>;
      const [script] = command.args;
      const isAttempt = (command.name === "evalsha" || command.name === "eval") && ATTEMPTS.has(String(script));
      return isAttempt ? this.attempts.pass(reply) : reply;
    };
    const duplicate = client.duplicate.bind(client);
    client.duplicate = ((override?: Parameters<Redis["duplicate"]>[0]) => {
      const subscriber = duplicate(override);
      const subscribe = subscriber.subscribe.bind(subscriber) as (channel: string) => Promise<unknown>;
      subscriber.subscribe = ((channel: string) => this.subscriptions.pass(subscribe(channel))) as Redis["subscribe"];
      subscriber.on("message", (_channel: string, message: string) => this.#heard(message));
      return subscriber;
    }) as Redis["duplicate"];
  }

  grantHeard(key: string): Promise<void> {
    return new Promise((heard) => this.#awaited.push({ resource: `:${key}`, heard }));
  }

  #heard(message: string): void {
    for (const [index, awaited] of this.#awaited.entries()) {
      if (message.startsWith("g:") && message.endsWith(awaited.resource)) {
        this.#awaited.splice(index, 1);
        awaited.heard();
        return;
      }
    }
  }
}

/** A new client to the server, scripted, and closed with the fixture. */
function scriptedClient(): ScriptedClient {
  const [client] = fixture.connect();
  if (client === undefined) throw new Error("no server");
  return new ScriptedClient(client);
}

/** A RedisLocker on a scripted client, closed with the fixture. */
function scriptedLocker(options: RedisLockerOptions): { locker: RedisLocker; scripted: ScriptedClient } {
  const scripted = scriptedClient();
  const locker = new RedisLocker(scripted.client, options);
  fixture.lockers.push(locker);
  return { locker, scripted };
}

/** A RedisSemaphore of one permit per key on `client`, closed with the fixture. */
function semaphore(client: Redis, options: RedisLockerOptions): RedisSemaphore {
  const made = new RedisSemaphore(client, { ...options, limit: 1 });
  fixture.lockers.push(made as unknown as RedisLocker);
  return made;
}

/** The liveness hash of a key's grant queue: one registration per queued waiter. */
const waitersOf = (resource: string): string => `{${resource}}:waiters`;

/** Waits until `count` waiters are registered in `resource`'s grant queue (their attempt ran in Redis). */
async function untilQueued(resource: string, count: number): Promise<void> {
  await eventually(async () => (await admin.hlen(waitersOf(resource))) === count, 20_000);
}

/** The grant channel of `resource`'s only queued waiter ("<deadline>:<token>:<channel>"). */
async function onlyGrantChannel(resource: string): Promise<string> {
  const [registration] = await admin.hvals(waitersOf(resource));
  const channel = /^\d+:[^:]*:(.*)$/.exec(registration ?? "")?.[1];
  if (channel === undefined) throw new Error(`no registration for ${resource}`);
  return channel;
}

async function subscribers(channel: string): Promise<number> {
  const [, count] = (await admin.call("PUBSUB", "NUMSUB", channel)) as [string, number];
  return Number(count);
}

describe("unusable grants go on at once (scripted interleavings)", () => {
  it("a grant handed to a caller that gives up before it waits again is passed on", async () => {
    const key = uniqueKey();
    const resource = `globallock:${key}`;
    const { locker, scripted } = scriptedLocker(quiet);
    const next = fixture.locker(quiet);
    const releaseOwn = await locker.lock(undefined, key);
    // A second caller behind its own locker's holder joins the queue at once, then subscribes to
    // its locker's grant channel: the confirmation is held back, so it is still subscribing when
    // its grant arrives (as when both arrive in one read: the grant is handled first), and its
    // caller can give up before it waits for the grant.
    scripted.subscriptions.close();
    const giveUp = new AbortController();
    const gaveUp = locker.lock(giveUp.signal, key).catch((error: unknown) => error);
    await untilQueued(resource, 1);
    const channel = await onlyGrantChannel(resource);
    await eventually(async () => (await subscribers(channel)) === 1, 20_000);
    const nextHolds = next.lock(AbortSignal.timeout(PATIENCE_MS), key);
    await untilQueued(resource, 2);
    const heard = scripted.grantHeard(key);
    await releaseOwn(); // grants the key to the second caller's registration, first in line
    await heard;
    giveUp.abort(); // before it acts on the subscription, and so before it waits for the grant
    expect(await gaveUp).toBe(giveUp.signal.reason);
    // Granted on by the caller that gave up: the next locker polls only in 30 s.
    const releaseNext = await nextHolds;
    scripted.subscriptions.open();
    await releaseNext();
    expect(await admin.exists(resource)).toBe(0);
  });

  it("a grant to a registration the locker does not count on (an attempt cut short) is given back", async () => {
    const key = uniqueKey();
    const resource = `globallock:${key}`;
    const holder = fixture.locker(quiet);
    const { locker, scripted } = scriptedLocker({ ...quiet, operationTimeout: 10_000 });
    const next = fixture.locker(quiet);
    const order: string[] = [];
    const releaseHolder = await holder.lock(undefined, key);
    // The first caller's lean try fails, it subscribes, and tries again joining the queue: that
    // attempt runs in Redis, its reply is held back.
    scripted.attempts.close();
    const giveUp = new AbortController();
    const first = locker.lock(giveUp.signal, key).catch((error: unknown) => error);
    await untilQueued(resource, 1);
    const second = locker.lock(AbortSignal.timeout(PATIENCE_MS), key).then((release) => {
      order.push("second");
      return release;
    });
    second.catch(() => undefined); // awaited below; a failure before that must not go unhandled
    await untilWaiting(locker, 2);
    const nextHolds = next.lock(AbortSignal.timeout(PATIENCE_MS), key).then((release) => {
      order.push("next");
      return release;
    });
    await untilQueued(resource, 2);
    const heard = scripted.grantHeard(key);
    // Grants the key to the registration of the attempt in flight: its message is kept until the
    // attempt settles.
    await releaseHolder();
    await heard;
    // The first caller gives up with that attempt in flight: its locker learns of the registration
    // only from the late reply, so the grant names a token it does not count on.
    giveUp.abort();
    expect(await first).toBe(giveUp.signal.reason);
    // Given back, the key goes to the next locker in line (the second caller's attempt is held).
    const releaseNext = await nextHolds;
    scripted.attempts.open();
    await releaseNext();
    const releaseSecond = await second;
    await releaseSecond();
    expect(order).toEqual(["next", "second"]);
    expect(await admin.exists(resource)).toBe(0);
  });

  it("a semaphore's attempt that timed out here after joining the queue leaves it with its clean-up", async () => {
    const key = uniqueKey();
    const resource = `globallock:semaphore:${key}`;
    const scripted = scriptedClient();
    const holder = semaphore(fixture.connect()[0] as Redis, quiet);
    // A short operation timeout: the reply held back comes too late.
    const timingOut = semaphore(scripted.client, { ...quiet, operationTimeout: 300 });
    const next = semaphore(fixture.connect()[0] as Redis, quiet);
    const lease = await holder.acquire(undefined, key);
    // Its first attempt joins the queue in Redis; the reply is held back past the timeout.
    scripted.attempts.close();
    const timedOut = await timingOut.acquire(AbortSignal.timeout(PATIENCE_MS), key).catch((error: unknown) => error);
    expect(timedOut).toBeInstanceOf(StoreUnavailableError);
    scripted.attempts.open();
    // Its clean-up has run once the locker closed (close waits for the store operations in flight).
    await timingOut.close();
    expect(await admin.hlen(waitersOf(resource))).toBe(0);
    // So the next waiter is not queued behind a registration nobody keeps alive: the release
    // grants it the permit.
    const nextLease = next.acquire(AbortSignal.timeout(PATIENCE_MS), key);
    await untilQueued(resource, 1);
    await lease.release();
    await (await nextLease).release();
  });

  it("a lock's attempt that timed out here after joining the queue leaves it with its clean-up", async () => {
    const key = uniqueKey();
    const resource = `globallock:${key}`;
    const { locker, scripted } = scriptedLocker({ ...quiet, operationTimeout: 300 });
    const lease = await locker.acquire(undefined, key);
    // A caller behind its own locker's holder joins the queue at its first attempt; the reply is
    // held back past the timeout.
    scripted.attempts.close();
    const timedOut = await locker.acquire(AbortSignal.timeout(PATIENCE_MS), key).catch((error: unknown) => error);
    expect(timedOut).toBeInstanceOf(StoreUnavailableError);
    scripted.attempts.open();
    await lease.release();
    await locker.close();
    expect(await admin.hlen(waitersOf(resource))).toBe(0);
  });
});
