/**
 * PostgresTableLocker through a real PgBouncer in transaction mode (every statement may land on
 * another server connection): the lock contract, and the faults (holders in other processes, a
 * SIGKILLed holder, a row deleted by hand).
 */
import { afterAll } from "vitest";
import { lockerContract } from "../contracts/contract.js";
import { sharedFixture } from "../helpers/table-harness.js";
import { tableFaults } from "./table-faults.js";
import { tableSmoke } from "./table-smoke.js";

const fixture = sharedFixture("postgres");
afterAll(() => fixture.stop());

lockerContract("PostgresTableLocker (PgBouncer, pool_mode=transaction)", async () => (await fixture.get()).harness());
tableFaults("PostgresTableLocker (PgBouncer, pool_mode=transaction)", () => fixture.get());
tableSmoke("PostgresTableLocker (PgBouncer, pool_mode=transaction)", () => fixture.get());
