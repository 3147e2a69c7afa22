import { afterAll } from "vitest";
import { lockerContract } from "../contracts/contract.js";
import { lockAllSuite } from "../contracts/lock-all-contract.js";
import { MySqlFixture } from "../helpers/mysql-harness.js";

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
