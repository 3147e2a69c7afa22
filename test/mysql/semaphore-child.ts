/**
 * A MySqlSemaphore in a child process (see test/helpers/remote-child.ts), on a pool of its own;
 * options: { connection, options }.
 */
import mysql from "mysql2/promise";
import { MySqlSemaphore, type MySqlSemaphoreOptions } from "../../src/mysql/mysql-semaphore.js";
import { serve } from "../helpers/remote-child.js";

serve((given) => {
  const { connection, options } = given as { connection: mysql.PoolOptions; options: MySqlSemaphoreOptions };
  return new MySqlSemaphore(mysql.createPool({ ...connection, connectionLimit: 4 }), options);
});
