/**
 * Lua scripts given to redlock in place of its own.
 *
 * The release script is redlock's compare-and-delete plus a PUBLISH on the key's channel, in the
 * same atomic step, so that waiters in every process wake as soon as the key is free. The channel
 * name is the full Redis key (prefix included); pub/sub channels do not share the key space.
 * Like redlock's, it returns the number of keys it deleted, which redlock compares with the number
 * of keys asked for.
 */
export const RELEASE_AND_PUBLISH_SCRIPT = `
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
