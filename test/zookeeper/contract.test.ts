/** The lock, lockAll, semaphore and read-write contract suites on one real ZooKeeper server. */
import { lockerContract } from "../contracts/contract.js";
import { lockAllSuite } from "../contracts/lock-all-contract.js";
import { readWriteContract } from "../contracts/read-write-contract.js";
import { semaphoreContract } from "../contracts/semaphore-contract.js";
import { ZooKeeperFixture } from "../helpers/zookeeper-harness.js";

lockerContract("ZooKeeperLocker", async () => (await ZooKeeperFixture.start()).harness());
lockAllSuite("ZooKeeperLocker", async () => (await ZooKeeperFixture.start()).harness());
semaphoreContract("ZooKeeperSemaphore", async () => (await ZooKeeperFixture.start()).semaphoreHarness());
readWriteContract("ZooKeeperReadWriteLocker", async () => (await ZooKeeperFixture.start()).readWriteHarness());
