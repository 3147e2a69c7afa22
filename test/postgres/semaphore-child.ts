/**
 * A PostgresSemaphore in a child process (see test/helpers/remote-child.ts), on a pool of its own;
 * options: { connection, options }.
 */
import pg from "pg";
import { PostgresSemaphore, type PostgresSemaphoreOptions } from "../../src/postgres/postgres-semaphore.js";
import { serve } from "../helpers/remote-child.js";

serve((given) => {
  const { connection, options } = given as { connection: pg.PoolConfig; options: PostgresSemaphoreOptions };
  return new PostgresSemaphore(new pg.Pool({ ...connection, max: 4 }), options);
});
