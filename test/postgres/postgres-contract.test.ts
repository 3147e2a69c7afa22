import { lockerContract } from "../contracts/contract.js";
import { lockAllSuite } from "../contracts/lock-all-contract.js";
import { PostgresFixture } from "../helpers/postgres-harness.js";

lockerContract("PostgresLocker", async () => (await PostgresFixture.start()).harness());
lockAllSuite("PostgresLocker", async () => (await PostgresFixture.start()).harness());
