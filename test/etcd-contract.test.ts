/** The lock, lockAll, semaphore and read-write contract suites on one real etcd server. */
import { lockerContract } from "./contract.js";
import { EtcdFixture } from "./helpers/etcd-harness.js";
import { lockAllSuite } from "./lock-all-contract.js";
import { readWriteContract } from "./read-write-contract.js";
import { semaphoreContract } from "./semaphore-contract.js";

lockerContract("EtcdLocker", async () => (await EtcdFixture.start()).harness());
lockAllSuite("EtcdLocker", async () => (await EtcdFixture.start()).harness());
semaphoreContract("EtcdSemaphore", async () => (await EtcdFixture.start()).semaphoreHarness());
readWriteContract("EtcdReadWriteLocker", async () => (await EtcdFixture.start()).readWriteHarness());
