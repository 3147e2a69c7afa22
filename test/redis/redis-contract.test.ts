import { lockerContract } from "../contracts/contract.js";
import { lockAllSuite } from "../contracts/lock-all-contract.js";
import { RedisFixture } from "../helpers/redis-harness.js";

lockerContract("RedisLocker, one node", async () => (await RedisFixture.start(1)).harness());
lockerContract("RedisLocker, three-node quorum", async () => (await RedisFixture.start(3)).harness());
lockAllSuite("RedisLocker, one node", async () => (await RedisFixture.start(1)).harness());
lockAllSuite("RedisLocker, three-node quorum", async () => (await RedisFixture.start(3)).harness());
