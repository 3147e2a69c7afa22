/**
 * What the code blocks of README.md and docs/*.md may use without importing it: the package's
 * exports (as if imported from "globallock") and a few application stand-ins. Checked by
 * test/package/docs-snippets.test.ts, which type-checks every `ts` block against this prelude.
 */

// The package, as if imported.
declare const lockAndDo: typeof import("globallock").lockAndDo;
declare const tryLockAndDo: typeof import("globallock").tryLockAndDo;
declare const lockAll: typeof import("globallock").lockAll;
declare const tryLockAll: typeof import("globallock").tryLockAll;
declare const fencedWrite: typeof import("globallock").fencedWrite;
declare const MemoryLocker: typeof import("globallock").MemoryLocker;
type MemoryLocker = import("globallock").MemoryLocker;
declare const MemorySemaphore: typeof import("globallock").MemorySemaphore;
declare const MemoryReadWriteLocker: typeof import("globallock").MemoryReadWriteLocker;
declare const RedisLocker: typeof import("globallock").RedisLocker;
type RedisLocker = import("globallock").RedisLocker;
declare const RedisSemaphore: typeof import("globallock").RedisSemaphore;
declare const RedisReadWriteLocker: typeof import("globallock").RedisReadWriteLocker;
declare const LockLostError: typeof import("globallock").LockLostError;
declare const StoreUnavailableError: typeof import("globallock").StoreUnavailableError;
declare const FaultyLocker: typeof import("globallock/testing").FaultyLocker;
declare const PostgresLocker: typeof import("globallock").PostgresLocker;
declare const MySqlLocker: typeof import("globallock").MySqlLocker;
declare const EtcdLocker: typeof import("globallock").EtcdLocker;
declare const CombinedLocker: typeof import("globallock").CombinedLocker;
declare const FileLocker: typeof import("globallock").FileLocker;
declare const PostgresTableLocker: typeof import("globallock").PostgresTableLocker;
declare const SqliteLocker: typeof import("globallock").SqliteLocker;
declare const ZooKeeperLocker: typeof import("globallock").ZooKeeperLocker;
declare const MemcachedLocker: typeof import("globallock").MemcachedLocker;
declare const MEMCACHED_CLIENT_OPTIONS: typeof import("globallock").MEMCACHED_CLIENT_OPTIONS;
type Locker = import("globallock").Locker;
type Lease = import("globallock").Lease;
type AcquireOptions = import("globallock").AcquireOptions;
type ReleaseFunc = import("globallock").ReleaseFunc;

// The application around the snippets.
declare const redis: import("ioredis").Redis;
declare const signal: AbortSignal;
declare const locker: import("globallock").Locker;
declare const jobId: string;
declare const is4k: boolean;
declare const rows: string[];
declare function buildReport(): Promise<void>;
declare const db: {
  write(rows: string[], fencingToken: bigint | undefined): Promise<void>;
  updateOrder(id: number, change: { status: string }, fencingToken: bigint | undefined): Promise<void>;
};
declare function compute(): Promise<string[]>;
declare function sendNightlyReport(): Promise<void>;
declare function runLeaderDuties(signal: AbortSignal): Promise<void>;
declare function computeJob(id: string): Promise<string>;
declare function renderOrderPage(id: number): Promise<string>;
declare function runExport(userId: string, lost: AbortSignal): Promise<void>;
declare function syncCrm(lost: AbortSignal): Promise<void>;
declare const userId: string;
declare const queue: { add(name: string, data: { userId: string; lockHandle: string }): Promise<void> };
declare const job: { data: { userId: string; lockHandle: string } };
