// Shows what a lock is for: WORKERS concurrent workers each add 1 to a shared counter ROUNDS times
// with a read, a pause, and a write. Without a lock, updates are lost; with one, the count is exact.
//
//   npm run example                      # in-process, MemoryLocker
//   REDIS_URL=redis://127.0.0.1:6379 npm run example   # across connections, RedisLocker
//
// With REDIS_URL, the counter lives in Redis and every worker has its own connection and locker,
// as separate processes would.

import { lockAndDo, MemoryLocker, RedisLocker } from "globallock";
import { Redis } from "ioredis";

const WORKERS = 8;
const ROUNDS = 25;
const pause = () => new Promise((resolve) => setTimeout(resolve, Math.random() * 2));

async function main() {
  const redisUrl = process.env.REDIS_URL;
  const store = redisUrl ? await redisStore(redisUrl) : memoryStore();
  console.log(`globallock example: ${WORKERS} workers x ${ROUNDS} increments on ${store.name}`);
  try {
    for (const useLock of [false, true]) {
      await store.reset();
      await Promise.all(
        Array.from({ length: WORKERS }, async (_, worker) => {
          const locker = store.lockerFor(worker);
          for (let i = 0; i < ROUNDS; i++) {
            const increment = async () => {
              const value = await store.read();
              await pause(); // another worker may read the same value meanwhile
              await store.write(value + 1);
            };
            if (useLock) await lockAndDo(locker, undefined, "counter", increment);
            else await increment();
          }
        }),
      );
      const final = await store.read();
      const expected = WORKERS * ROUNDS;
      const verdict = final === expected ? "exact" : `${expected - final} updates lost`;
      console.log(
        `${useLock ? "with the lock:   " : "without a lock:  "} counter = ${final} / ${expected} (${verdict})`,
      );
    }
  } finally {
    await store.close();
  }
}

function memoryStore() {
  let counter = 0;
  const locker = new MemoryLocker();
  return {
    name: "MemoryLocker (one process)",
    lockerFor: () => locker,
    reset: async () => {
      counter = 0;
    },
    read: async () => counter,
    write: async (value) => {
      counter = value;
    },
    close: () => locker.close(),
  };
}

async function redisStore(url) {
  const counterKey = `globallock-example:counter:${process.pid}`;
  const admin = new Redis(url);
  const clients = [];
  const lockers = Array.from({ length: WORKERS }, () => {
    const client = new Redis(url);
    clients.push(client);
    return new RedisLocker(client, { prefix: "globallock-example:" });
  });
  return {
    name: `RedisLocker (${url}, one connection per worker)`,
    lockerFor: (worker) => lockers[worker],
    reset: async () => {
      await admin.set(counterKey, "0");
    },
    read: async () => Number(await admin.get(counterKey)),
    write: async (value) => {
      await admin.set(counterKey, String(value));
    },
    close: async () => {
      await Promise.all(lockers.map((locker) => locker.close()));
      await admin.del(counterKey);
      await Promise.all([admin, ...clients].map((client) => client.quit()));
    },
  };
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
