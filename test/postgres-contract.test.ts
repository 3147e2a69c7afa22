import { lockerContract } from "./contract.js";
import { PostgresFixture } from "./helpers/postgres-harness.js";
import { lockAllSuite } from "./lock-all-contract.js";

lockerContract("PostgresLocker", async () => (await PostgresFixture.start()).harness());
lockAllSuite("PostgresLocker", async () => (await PostgresFixture.start()).harness());
