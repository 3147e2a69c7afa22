export {
  describeValue,
  GlobalLockError,
  type GlobalLockErrorCode,
  InvalidArgumentError,
  LockerClosedError,
  LockLostError,
  type LockLostReason,
  StoreUnavailableError,
  UnsupportedError,
} from "./errors.js";
export { fencedWrite } from "./fencing/fenced-write.js";
export { MAX_KEY_BYTES } from "./internal/validate.js";
export {
  type AcquireOptions,
  type Lease,
  type Locker,
  lockAndDo,
  type ReleaseFunc,
  type ReleaseOutcome,
  tryLockAndDo,
} from "./locker.js";
export { MemoryLocker, type MemoryLockerOptions } from "./memory/memory-locker.js";
export { FENCING_COUNTER_TTL_MS } from "./redis/fencing.js";
export { MIN_EXPIRY_MS, type RedisLockerOptions } from "./redis/options.js";
export { RedisLocker } from "./redis/redis-locker.js";
export type { RedisClient } from "./redis/types.js";
