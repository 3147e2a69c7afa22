// The README's first example: one critical section on Redis. Run it against a Redis you own:
//   npm run build && REDIS_URL=redis://127.0.0.1:6379 node examples/quick-start.mjs
import { lockAndDo, RedisLocker } from "globallock";
import { Redis } from "ioredis";

const redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
const locker = new RedisLocker(redis);

// Wait at most 10 s for the lock; once held, it is kept alive for as long as the work runs.
const signal = AbortSignal.timeout(10_000);
const invoice = await lockAndDo(locker, signal, "invoice:42", async (lease) => {
  // Only one process at a time runs this for "invoice:42".
  const total = 2 * 49.75; // read, compute, write…
  lease.assertHeld(); // throws LockLostError if the lock was lost meanwhile (say, a long pause)
  return { id: 42, total };
});
console.log("recomputed", invoice);

await locker.close(); // stops keeping locks alive; the connection stays yours
redis.disconnect();
