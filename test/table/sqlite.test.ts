/**
 * SqliteLocker and its kin on one database file, each locker on its own connection: the lock,
 * semaphore and read-write contracts, and the faults (holders in child processes, a SIGKILLed
 * holder, a row deleted by hand).
 */
import { afterAll } from "vitest";
import { lockerContract } from "../contracts/contract.js";
import { readWriteContract } from "../contracts/read-write-contract.js";
import { semaphoreContract } from "../contracts/semaphore-contract.js";
import { sharedFixture } from "../helpers/table-harness.js";
import { tableFaults } from "./table-faults.js";
import { tableSmoke } from "./table-smoke.js";

const fixture = sharedFixture("sqlite");
afterAll(() => fixture.stop());

lockerContract("SqliteLocker", async () => (await fixture.get()).harness());
semaphoreContract("SqliteSemaphore", async () => (await fixture.get()).semaphoreHarness());
readWriteContract("SqliteReadWriteLocker", async () => (await fixture.get()).readWriteHarness());
tableFaults("SqliteLocker", () => fixture.get());
tableSmoke("SqliteLocker", () => fixture.get());
