// A counting semaphore: at most 10 thumbnail jobs render at once, and a 4K job counts as 2.
//
//   node examples/thumbnails.mjs                                  # in-process, MemorySemaphore
//   REDIS_URL=redis://127.0.0.1:6379 node examples/thumbnails.mjs # across connections, RedisSemaphore
//
// With REDIS_URL, each of the 4 "servers" below has its own connection and semaphore, as separate
// processes would; the limit holds across all of them.

import { MemorySemaphore, RedisSemaphore } from "globallock";
import { Redis } from "ioredis";

const LIMIT = 10;
const SERVERS = 4;
const JOBS_PER_SERVER = 15;

let inUse = 0;
let peak = 0;

/** Renders one thumbnail while holding the permits it needs: 2 for a 4K image, else 1. */
async function renderThumbnail(semaphore, job) {
  const lease = await semaphore.acquire(AbortSignal.timeout(60_000), "thumbnails", { weight: job.is4k ? 2 : 1 });
  try {
    inUse += job.is4k ? 2 : 1;
    peak = Math.max(peak, inUse);
    await new Promise((resolve) => setTimeout(resolve, job.is4k ? 40 : 15)); // the rendering
    inUse -= job.is4k ? 2 : 1;
  } finally {
    await lease.release();
  }
}

async function main() {
  const redisUrl = process.env.REDIS_URL;
  const clients = [];
  const memory = new MemorySemaphore({ limit: LIMIT });
  const semaphores = Array.from({ length: SERVERS }, () => {
    if (!redisUrl) return memory;
    const client = new Redis(redisUrl);
    clients.push(client);
    return new RedisSemaphore(client, { limit: LIMIT });
  });
  const kind = redisUrl ? "RedisSemaphore" : "MemorySemaphore";
  try {
    await Promise.all(
      semaphores.flatMap((semaphore, server) =>
        Array.from({ length: JOBS_PER_SERVER }, (_, i) => renderThumbnail(semaphore, { is4k: (server + i) % 5 === 0 })),
      ),
    );
    console.log(`${kind}: ${SERVERS * JOBS_PER_SERVER} thumbnails, at most ${peak} / ${LIMIT} permits in use`);
  } finally {
    await Promise.all([...new Set(semaphores)].map((semaphore) => semaphore.close()));
    for (const client of clients) client.disconnect();
  }
}

await main();
