import { InvalidArgumentError } from "../errors.js";
import { validateKey } from "../internal/validate.js";
import { connectionOf } from "../redis/client/connection-of.js";
import type { RedisClient } from "../redis/types.js";

/**
 * Compare-and-set on a hash `{ fence, value }`: accepts the write when its token is at least the
 * highest token seen (the same holder may write again), rejects it when lower. Tokens are compared
 * as decimal strings (length first), so they stay exact beyond 2^53.
 */
const FENCED_WRITE = `
local seen = redis.call("hget", KEYS[1], "fence")
local token = ARGV[1]
if seen and (#token < #seen or (#token == #seen and token < seen)) then return 0 end
redis.call("hset", KEYS[1], "fence", token, "value", ARGV[2])
return 1
`;

/**
 * Writes `value` to the Redis hash `key` only if `fencingToken` is not older than the newest token
 * that hash has accepted: the storage-side half of fencing. A holder that lost its lock (paused,
 * partitioned) and comes back with an old token is refused, even though it still believes it holds
 * the lock. Resolves to `true` when written, `false` when rejected as stale.
 *
 * This is an example of a protected resource; any store with a conditional write (SQL
 * `UPDATE … WHERE fence <= $token`, an object store's preconditions) can do the same.
 */
export async function fencedWrite(
  client: RedisClient,
  key: string,
  fencingToken: bigint,
  value: string,
): Promise<boolean> {
  validateKey(key);
  if (typeof fencingToken !== "bigint" || fencingToken < 0n) {
    throw new InvalidArgumentError("fencingToken", "a non-negative bigint", fencingToken);
  }
  if (typeof value !== "string") throw new InvalidArgumentError("value", "a string", value);
  const reply = await connectionOf(client).eval(FENCED_WRITE, [key], [fencingToken.toString(), value]);
  return reply === 1;
}
