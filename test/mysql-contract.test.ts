import { afterAll } from "vitest";
import { lockerContract } from "./contract.js";
import { MySqlFixture } from "./helpers/mysql-harness.js";
import { lockAllSuite } from "./lock-all-contract.js";

// One server for the file's suites.
let started: Promise<MySqlFixture> | undefined;
const fixture = (): Promise<MySqlFixture> => {
  started ??= MySqlFixture.start();
  return started;
};
afterAll(async () => {
  await (await started)?.stop();
});

lockerContract("MySqlLocker", async () => (await fixture()).harness());
lockAllSuite("MySqlLocker", async () => (await fixture()).harness());
