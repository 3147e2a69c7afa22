export { CombinedLocker, type CombinedLockerOptions, type CombinedStrategy } from "./combined/combined-locker.js";
export { checkDeployment } from "./deployment/check-deployment.js";
export type { Finding } from "./deployment/finding.js";
export {
  ACQUIRE_CHANNEL,
  type AcquireMessage,
  type AcquireMode,
  type AcquireOutcome,
  EXTEND_CHANNEL,
  type ExtendMessage,
  type ExtendOutcome,
  LOST_CHANNEL,
  type LockerKind,
  type LockerStore,
  type LostMessage,
  RELEASE_CHANNEL,
  type ReleaseMessage,
} from "./diagnostics.js";
export {
  GlobalLockError,
  type GlobalLockErrorCode,
  InvalidArgumentError,
  LockerClosedError,
  LockLostError,
  type LockLostReason,
  StoreUnavailableError,
  UnsupportedError,
} from "./errors.js";
export { EtcdLocker } from "./etcd/etcd-locker.js";
export { ETCD_READ_WRITE_PREFIX, EtcdReadWriteLocker } from "./etcd/etcd-read-write-locker.js";
export { ETCD_SEMAPHORE_PREFIX, EtcdSemaphore, type EtcdSemaphoreOptions } from "./etcd/etcd-semaphore.js";
export type { EtcdLockerOptions, ResolvedEtcdLockerOptions } from "./etcd/options.js";
export type {
  EtcdCallOptions,
  EtcdClient,
  EtcdCompare,
  EtcdKeyValue,
  EtcdLease,
  EtcdRangeRequest,
  EtcdRangeResponse,
  EtcdRequestOp,
  EtcdTxnRequest,
  EtcdTxnResponse,
  EtcdWatchBuilder,
  EtcdWatcher,
} from "./etcd/types.js";
export { fencedWrite } from "./fencing/fenced-write.js";
export { FileLocker } from "./file/file-locker.js";
export { FileReadWriteLocker } from "./file/file-read-write-locker.js";
export { FileSemaphore, type FileSemaphoreOptions } from "./file/file-semaphore.js";
export { defaultLockDirectory, type FileLockerOptions } from "./file/options.js";
export type { FileStoreStats } from "./file/store.js";
export { lockAll, tryLockAll } from "./lock-all.js";
export {
  type AcquireOptions,
  type AdoptOptions,
  type HolderInfo,
  type Lease,
  type LeaseKeeperStats,
  type ListOptions,
  type Locker,
  type LockInfo,
  lockAndDo,
  MAX_KEY_BYTES,
  type ReleaseFunc,
  type ReleaseOutcome,
  tryLockAndDo,
} from "./locker.js";
export { MEMCACHED_CLIENT_OPTIONS } from "./memcached/client-options.js";
export { MemcachedLocker } from "./memcached/memcached-locker.js";
export type { MemcachedLockerOptions, ResolvedMemcachedLockerOptions } from "./memcached/options.js";
export type { MemcachedCallback, MemcachedClient } from "./memcached/types.js";
export type { MemoryOptions } from "./memory/memory-backend.js";
export { MemoryLocker, type MemoryLockerOptions } from "./memory/memory-locker.js";
export { MemoryReadWriteLocker, type MemoryReadWriteLockerOptions } from "./memory/memory-read-write-locker.js";
export { MemorySemaphore, type MemorySemaphoreOptions } from "./memory/memory-semaphore.js";
export { MySqlLocker } from "./mysql/mysql-locker.js";
export {
  MAX_MYSQL_PERMITS,
  MYSQL_SEMAPHORE_PREFIX,
  MySqlSemaphore,
  type MySqlSemaphoreOptions,
} from "./mysql/mysql-semaphore.js";
export type { MySqlLockerOptions, ResolvedMySqlLockerOptions } from "./mysql/options.js";
export type { MySqlCoreConnection, MySqlPool, MySqlPoolConnection } from "./mysql/types.js";
export type { PostgresLockerOptions, ResolvedPostgresLockerOptions } from "./postgres/options.js";
export { PostgresLocker } from "./postgres/postgres-locker.js";
export { PostgresReadWriteLocker } from "./postgres/postgres-read-write-locker.js";
export {
  MAX_POSTGRES_PERMITS,
  POSTGRES_SEMAPHORE_PREFIX,
  PostgresSemaphore,
  type PostgresSemaphoreOptions,
} from "./postgres/postgres-semaphore.js";
export type { PostgresNotification, PostgresPool, PostgresPoolClient } from "./postgres/types.js";
export type { ReadWriteLocker } from "./read-write.js";
export { FENCING_COUNTER_TTL_MS } from "./redis/fencing.js";
export { MIN_EXPIRY_MS, type RedisLockerOptions, type ResolvedRedisLockerOptions } from "./redis/options.js";
export { RedisLocker } from "./redis/redis-locker.js";
export { READ_WRITE_PREFIX, RedisReadWriteLocker } from "./redis/redis-read-write-locker.js";
export { RedisSemaphore, type RedisSemaphoreOptions, SEMAPHORE_PREFIX } from "./redis/redis-semaphore.js";
export type { IoRedisClient, NodeRedisClient, RedisClient } from "./redis/types.js";
export { MySqlTableLocker, MySqlTableReadWriteLocker, MySqlTableSemaphore } from "./table/mysql-table-locker.js";
export type { ResolvedTableLockerOptions, TableLockerOptions } from "./table/options.js";
export {
  PostgresTableLocker,
  PostgresTableReadWriteLocker,
  PostgresTableSemaphore,
} from "./table/postgres-table-locker.js";
export type { SqliteDatabase, SqliteRunResult, SqliteStatement } from "./table/sqlite-dialect.js";
export { SqliteLocker, SqliteReadWriteLocker, SqliteSemaphore } from "./table/sqlite-locker.js";
export { TABLE_READ_WRITE_PREFIX, TABLE_SEMAPHORE_PREFIX, type TableSemaphoreOptions } from "./table/table-parts.js";
export {
  type ResolvedZooKeeperLockerOptions,
  ZOOKEEPER_PREFIX,
  type ZooKeeperLockerOptions,
} from "./zookeeper/options.js";
export type {
  ZooKeeperCallbackError,
  ZooKeeperClient,
  ZooKeeperEvent,
  ZooKeeperException,
  ZooKeeperStat,
  ZooKeeperState,
} from "./zookeeper/types.js";
export { ZooKeeperLocker } from "./zookeeper/zookeeper-locker.js";
export { ZOOKEEPER_READ_WRITE_PREFIX, ZooKeeperReadWriteLocker } from "./zookeeper/zookeeper-read-write-locker.js";
export {
  ZOOKEEPER_SEMAPHORE_PREFIX,
  ZooKeeperSemaphore,
  type ZooKeeperSemaphoreOptions,
} from "./zookeeper/zookeeper-semaphore.js";
