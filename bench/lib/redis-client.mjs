/**
 * ioredis connections to the benchmark's own redis-server (127.0.0.1 only).
 */
import { Redis } from "ioredis";

/**
 * Opens a client to 127.0.0.1:`port` and resolves once it is ready. Connection errors are logged
 * once per client instead of crashing the benchmark (a failing command still rejects).
 * @param {number} port
 * @returns {Promise<Redis>}
 */
export async function connectClient(port) {
  const client = new Redis({ host: "127.0.0.1", port, lazyConnect: true, maxRetriesPerRequest: 1 });
  let reported = false;
  client.on("error", (error) => {
    if (reported) return;
    reported = true;
    process.stderr.write(`bench: redis client error on port ${port}: ${error.message}\n`);
  });
  await client.connect();
  return client;
}
