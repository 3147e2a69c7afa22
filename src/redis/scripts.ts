import { defineScript } from "./script-runner.js";

/**
 * Lua scripts. Every release deletes only while the token matches and PUBLISHes on the key's
 * channel in the same atomic step, so waiters in every process wake as soon as the key is free.
 * The channel name is the full Redis key (pub/sub channels do not share the key space).
 */

/**
 * Given to redlock (as a modifier of its own release script) for the clean-up it does after a
 * failed quorum acquisition. Returns the number of keys deleted, as redlock expects.
 */
export const REDLOCK_RELEASE_SCRIPT = `
local count = 0
for _, key in ipairs(KEYS) do
  if redis.call("get", key) == ARGV[1] then
    redis.call("del", key)
    redis.call("publish", key, "")
    count = count + 1
  end
end
return count
`;

/**
 * Our own release, so it can say what it found: 1 deleted, 0 key already gone, -1 key held by
 * another token (left alone). KEYS[1] lock key; ARGV[1] token.
 */
export const RELEASE = defineScript(`
local current = redis.call("get", KEYS[1])
if current == ARGV[1] then
  redis.call("del", KEYS[1])
  redis.call("publish", KEYS[1], "")
  return 1
end
if current then return -1 end
return 0
`);

/**
 * Issues a fencing token, only while the lock is held by ARGV[1]: max(server time in microseconds,
 * last token + 1). Time makes tokens keep rising across a restart that lost the counter; the
 * counter makes them strictly rising within a microsecond. Returns the token as a decimal string,
 * or nil when the lock is not held by ARGV[1]. KEYS[1] lock key, KEYS[2] fencing counter key;
 * ARGV[2] the counter's TTL in ms.
 */
export const ISSUE_FENCING_TOKEN = defineScript(`
if redis.call("get", KEYS[1]) ~= ARGV[1] then return false end
local time = redis.call("time")
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local last = tonumber(redis.call("get", KEYS[2]) or "0")
local token = string.format("%.0f", math.max(now, last + 1))
redis.call("set", KEYS[2], token, "PX", ARGV[2])
return token
`);
