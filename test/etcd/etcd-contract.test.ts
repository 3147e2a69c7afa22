/** The lock, lockAll, semaphore and read-write contract suites on one real etcd server. */
import { lockerContract } from "../contracts/contract.js";
import { lockAllSuite } from "../contracts/lock-all-contract.js";
import { readWriteContract } from "../contracts/read-write-contract.js";
import { semaphoreContract } from "../contracts/semaphore-contract.js";
import { EtcdFixture } from "../helpers/etcd-harness.js";

lockerContract("EtcdLocker", async () => (await EtcdFixture.start()).harness());
lockAllSuite("EtcdLocker", async () => (await EtcdFixture.start()).harness());
semaphoreContract("EtcdSemaphore", async () => (await EtcdFixture.start()).semaphoreHarness());
readWriteContract("EtcdReadWriteLocker", async () => (await EtcdFixture.start()).readWriteHarness());
