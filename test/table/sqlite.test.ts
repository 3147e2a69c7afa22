/** The lock, semaphore and read-write contract suites on SqliteLocker and its kin: one file, many connections. */
import { afterAll } from "vitest";
import { lockerContract } from "../contract.js";
import { sharedFixture } from "../helpers/table-harness.js";
import { readWriteContract } from "../read-write-contract.js";
import { semaphoreContract } from "../semaphore-contract.js";

const fixture = sharedFixture("sqlite");
afterAll(() => fixture.stop());

lockerContract("SqliteLocker", async () => (await fixture.get()).harness());
semaphoreContract("SqliteSemaphore", async () => (await fixture.get()).semaphoreHarness());
readWriteContract("SqliteReadWriteLocker", async () => (await fixture.get()).readWriteHarness());
