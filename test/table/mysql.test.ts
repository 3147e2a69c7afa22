/**
 * MySqlTableLocker on a real MariaDB server: the lock contract, and the faults (holders in other
 * processes, a SIGKILLed holder, a row deleted by hand).
 */
import { afterAll } from "vitest";
import { lockerContract } from "../contracts/contract.js";
import { sharedFixture } from "../helpers/table-harness.js";
import { tableFaults } from "./table-faults.js";
import { tableSmoke } from "./table-smoke.js";

const fixture = sharedFixture("mysql");
afterAll(() => fixture.stop());

lockerContract("MySqlTableLocker (MariaDB)", async () => (await fixture.get()).harness());
tableFaults("MySqlTableLocker (MariaDB)", () => fixture.get());
tableSmoke("MySqlTableLocker (MariaDB)", () => fixture.get());
