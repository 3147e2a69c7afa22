// A read-write lock: many requests read an order page at once; an update waits for them, then
// has the order to itself. A waiting update blocks readers that arrive after it.
//
//   node examples/order-page.mjs                                  # in-process, MemoryReadWriteLocker
//   REDIS_URL=redis://127.0.0.1:6379 node examples/order-page.mjs # across connections, RedisReadWriteLocker

import { lockAndDo, MemoryReadWriteLocker, RedisReadWriteLocker } from "globallock";
import { Redis } from "ioredis";

const order = { id: 42, status: "paid", version: 1 };
let readers = 0;
let mostReaders = 0;
let updateSawReaders = false;

/** Renders the order page under a read lock: many at once. */
async function viewOrder(orders) {
  return lockAndDo(orders.read, AbortSignal.timeout(10_000), `order:${order.id}`, async () => {
    readers += 1;
    mostReaders = Math.max(mostReaders, readers);
    const page = `order ${order.id}: ${order.status} (v${order.version})`;
    await new Promise((resolve) => setTimeout(resolve, 20));
    readers -= 1;
    return page;
  });
}

/** Updates the order under the write lock: alone, with a fencing token for the database. */
async function shipOrder(orders) {
  const lease = await orders.write.acquire(AbortSignal.timeout(10_000), `order:${order.id}`, { fencing: true });
  try {
    if (readers > 0) updateSawReaders = true;
    order.status = "shipped";
    order.version += 1;
    return lease.fencingToken; // pass it to the database, which rejects older tokens
  } finally {
    await lease.release();
  }
}

async function main() {
  const redis = process.env.REDIS_URL ? new Redis(process.env.REDIS_URL) : undefined;
  const orders = redis ? new RedisReadWriteLocker(redis) : new MemoryReadWriteLocker();
  try {
    const views = Array.from({ length: 6 }, () => viewOrder(orders));
    const update = shipOrder(orders);
    const later = Array.from({ length: 3 }, () => viewOrder(orders));
    const pages = await Promise.all([...views, ...later]);
    const token = await update;
    console.log(`${orders.constructor.name}: up to ${mostReaders} readers at once; update alone: ${!updateSawReaders}`);
    console.log(`first page: ${pages[0]}; last page: ${pages.at(-1)}; fencing token ${token}`);
  } finally {
    await orders.close();
    redis?.disconnect();
  }
}

await main();
