/** The lock contract suite (with its lease features) on one real Memcached server. */
import { lockerContract } from "../contracts/contract.js";
import { MemcachedFixture } from "../helpers/memcached-harness.js";

lockerContract("MemcachedLocker", async () => (await MemcachedFixture.start()).harness());
