import { defineScript } from "./script-runner.js";
import { COUNT_LIVE, nextFence, PARSE_REGISTRATION, PUBLISH_GRANT } from "./scripts.js";

/*
 * Lua scripts of counted locks: semaphores and read-write locks (a reader takes one permit of a
 * huge limit, a writer takes all of them). They mirror the lock scripts of scripts.ts — same KEYS
 * and ARGV, plus the limit — so one store and one locker engine run both.
 *
 * A key's holders are a sorted set: member = the holder's token, with ".<weight>" appended when it
 * takes more than one permit; score = its deadline in server ms. Entries expire on their own: every
 * script first drops members whose deadline passed, so a crashed holder's permits come back after
 * its lease, and the set itself expires with its last deadline.
 *
 * The hand-off queue is the lock's (arrival-ordered sorted set of waiter ids plus a hash of each
 * waiter's "<liveness deadline>:<token>:<grant channel>"), served strictly first in, first out: an attempt takes
 * permits only when no live waiter is queued ahead of it, and a release (or a waiter that leaves)
 * grants permits to queued waiters from the head for as long as they fit, stopping at the first one
 * that does not. So a heavy waiter is never overtaken by lighter ones queued behind it. A grant
 * adds the waiter's registered token with a deadline of the hand-off grace and tells the waiter
 * on its grant channel, as for locks.
 */

const PERMITS = `${PARSE_REGISTRATION}${PUBLISH_GRANT}
local t = redis.call("time")
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(now_us / 1000)

local function weight_of(member)
  local w = string.match(member, "%.(%d+)$")
  if w then return tonumber(w) end
  return 1
end

-- Drops holders whose deadline passed; returns the permits the others hold and the latest deadline.
local function permits_used(holders)
  redis.call("zremrangebyscore", holders, "-inf", now)
  local used, latest = 0, now
  local entries = redis.call("zrange", holders, 0, -1, "WITHSCORES")
  for i = 1, #entries, 2 do
    used = used + weight_of(entries[i])
    local deadline = tonumber(entries[i + 1])
    if deadline > latest then latest = deadline end
  end
  return used, latest
end

-- Adds a holder until now + ttl; the set lives until its latest deadline (latest: the others').
local function add_holder(holders, member, ttl, latest)
  redis.call("zadd", holders, now + ttl, member)
  if latest < now + ttl then latest = now + ttl end
  redis.call("pexpire", holders, latest - now)
end

-- The token and grant channel registered by live waiter id, or nil (a waiter whose liveness
-- passed is dropped).
local function live_token(queue, alive, id)
  local deadline, token, channel = parse_registration(redis.call("hget", alive, id) or "")
  if deadline and deadline > now then return token, channel end
  redis.call("zrem", queue, id)
  redis.call("hdel", alive, id)
  return nil
end

-- Grants permits to queued waiters from the head while they fit. Returns the first id granted, or "".
local function admit(holders, queue, alive, limit, grace, used, latest)
  local first = ""
  local head = redis.call("zrange", queue, 0, 0)[1]
  while head do
    local token, channel = live_token(queue, alive, head)
    if token then
      local weight = weight_of(token)
      if used + weight > limit then break end
      redis.call("zrem", queue, head)
      redis.call("hdel", alive, head)
      add_holder(holders, token, grace, latest)
      if latest < now + grace then latest = now + grace end
      publish_grant(holders, head, token, channel, now)
      used = used + weight
      if first == "" then first = head end
    end
    head = redis.call("zrange", queue, 0, 0)[1]
  end
  return first
end
`;

/** Lua: the next fencing token (see `nextFence`; here after PERMITS, which read the time). */
const NEXT_FENCE = nextFence("now_us");

/**
 * One attempt to take permits. KEYS: holders, queue, liveness, and the fencing counter when a
 * token is wanted. ARGV: token (with its weight), ttl (ms), waiter id ("" = not queued), "join",
 * on success "leave" | "keep", liveness window (ms), claim token ("" = none: a registration of this
 * locker that may have been granted permits), fencing counter TTL, limit, hand-off grace (ms), the
 * locker's grant channel.
 * Returns 0 when acquired (the fencing token as a string when asked for), else { ms until the
 * earliest holder's deadline (>= 1), server ms when it registered (0 when it did not join) }.
 */
export const ACQUIRE_PERMITS = defineScript(`${PERMITS}${NEXT_FENCE}
local holders, queue, alive = KEYS[1], KEYS[2], KEYS[3]
local token, ttl, id, join, onSuccess = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5]
local window, claim, limit, grace = tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[9]), tonumber(ARGV[10])
local used, latest = permits_used(holders)
local claimed = false
local ahead = false
local queued = true
if claim ~= "" and redis.call("zscore", holders, claim) then
  -- Granted to this locker already: its turn has come, whatever is queued now.
  redis.call("zrem", holders, claim)
  used = used - weight_of(claim)
  claimed = true
else
  local head = redis.call("zrange", queue, 0, 0)[1]
  queued = head ~= nil
  while head and head ~= id do
    if live_token(queue, alive, head) then
      ahead = true
      break
    end
    head = redis.call("zrange", queue, 0, 0)[1]
  end
end
local weight = weight_of(token)
if not ahead and used + weight <= limit then
  add_holder(holders, token, ttl, latest)
  if latest < now + ttl then latest = now + ttl end
  if queued and id ~= "" and onSuccess == "leave" then
    redis.call("zrem", queue, id)
    redis.call("hdel", alive, id)
  end
  -- Permits freed by expired holders (nobody's release granted them): the queue may fit in too.
  if queued then admit(holders, queue, alive, limit, grace, used + weight, latest) end
  if KEYS[4] then return next_fence(KEYS[4], ARGV[8]) end
  return 0
end
if claimed then admit(holders, queue, alive, limit, grace, used, latest) end
local registered = 0
if id ~= "" and join == "join" then
  registered = now
  redis.call("zadd", queue, "NX", now_us, id)
  redis.call("hset", alive, id, (now + window) .. ":" .. token .. ":" .. ARGV[#ARGV])
  redis.call("pexpire", queue, window)
  redis.call("pexpire", alive, window)
end
local retry = 1
local earliest = redis.call("zrange", holders, 0, 0, "WITHSCORES")[2]
if earliest and tonumber(earliest) - now > retry then retry = tonumber(earliest) - now end
return { retry, registered }
`);

/**
 * Extends many holders (one node, one Cluster slot) while each is still in its set and not past
 * its deadline. KEYS: the holders' sets (repeated for holders of one key). ARGV: ttl, then the
 * tokens, one per key, separated by spaces. Returns one character per key: "1" extended, "0" gone.
 */
export const EXTEND_PERMITS = defineScript(`${PERMITS}
local ttl, tokens = tonumber(ARGV[1]), ARGV[2]
local out = {}
local from = 1
for i, key in ipairs(KEYS) do
  local stop = string.find(tokens, " ", from, true) or 0
  local member = string.sub(tokens, from, stop - 1)
  from = stop + 1
  local score = redis.call("zscore", key, member)
  if score and tonumber(score) > now then
    redis.call("zadd", key, "XX", now + ttl, member)
    if redis.call("pttl", key) < ttl then redis.call("pexpire", key, ttl) end
    out[i] = "1"
  else
    if score then redis.call("zrem", key, member) end
    out[i] = "0"
  end
end
return table.concat(out)
`);

/**
 * Releases a holder's permits and grants them on (see admit). KEYS: holders, queue, liveness.
 * ARGV: token, grace (ms), limit. Returns { 1 released | 0 already gone or expired, first waiter
 * id granted or "" }.
 */
export const RELEASE_PERMITS = defineScript(`${PERMITS}
local holders, queue, alive = KEYS[1], KEYS[2], KEYS[3]
local score = redis.call("zscore", holders, ARGV[1])
if not score then return { 0, "" } end
redis.call("zrem", holders, ARGV[1])
local first = ""
-- Nobody queued (the uncontended case): nothing to grant, and the set's TTL still covers the rest.
if redis.call("zrange", queue, 0, 0)[1] then
  local used, latest = permits_used(holders)
  first = admit(holders, queue, alive, tonumber(ARGV[3]), tonumber(ARGV[2]), used, latest)
end
if tonumber(score) <= now then return { 0, first } end
return { 1, first }
`);

/**
 * Leaves a key's queue; permits granted to the leaver's registration meanwhile are given back.
 * Either may let the waiters behind it in (a heavy head that leaves unblocks lighter ones).
 * KEYS: holders, queue, liveness. ARGV: waiter id, claim token ("" = none), grace, limit.
 */
export const LEAVE_PERMIT_QUEUE = defineScript(`${PERMITS}
local holders, queue, alive = KEYS[1], KEYS[2], KEYS[3]
redis.call("zrem", queue, ARGV[1])
redis.call("hdel", alive, ARGV[1])
if ARGV[2] ~= "" then redis.call("zrem", holders, ARGV[2]) end
local used, latest = permits_used(holders)
admit(holders, queue, alive, tonumber(ARGV[4]), tonumber(ARGV[3]), used, latest)
return 1
`);

/**
 * A fencing token for a holder, only while it holds its permits. KEYS: holders, counter. ARGV:
 * token, counter TTL (ms). Returns the token as a decimal string, or nil.
 */
export const ISSUE_PERMIT_FENCING_TOKEN = defineScript(`${PERMITS}${NEXT_FENCE}
local score = redis.call("zscore", KEYS[1], ARGV[1])
if not score or tonumber(score) <= now then return false end
return next_fence(KEYS[2], ARGV[2])
`);

/**
 * Reads a key's holders for `inspect`, changing nothing (expired holders are skipped, not
 * dropped). KEYS: holders, and its queue and liveness keys when it has them. Returns { server ms,
 * live queued waiters, then each live holder's member and deadline (server ms) }.
 */
export const INSPECT_PERMITS = defineScript(`${COUNT_LIVE}
local t = redis.call("time")
local now = math.floor((tonumber(t[1]) * 1000000 + tonumber(t[2])) / 1000)
local waiting = 0
if KEYS[3] then waiting = count_live(KEYS[3], now) end
local out = { now, waiting }
for _, entry in ipairs(redis.call("zrangebyscore", KEYS[1], "(" .. now, "+inf", "WITHSCORES")) do
  out[#out + 1] = entry
end
return out
`);

/**
 * Takes over a handed-off holder: where the member ARGV[1] is still in the set and not past its
 * deadline, replaces it by ARGV[2] with a deadline ARGV[3] ms from now (the set lives at least as
 * long). The queue and the fencing counter are left as they are. Also undoes an adoption (the
 * members swapped). KEYS: holders. Returns 1 swapped | 0 gone or expired (a member is unique to
 * its holder: nobody else can hold it).
 */
export const ADOPT_PERMITS = defineScript(`
local t = redis.call("time")
local now = math.floor((tonumber(t[1]) * 1000000 + tonumber(t[2])) / 1000)
local holders, ttl = KEYS[1], tonumber(ARGV[3])
local score = redis.call("zscore", holders, ARGV[1])
if not score or tonumber(score) <= now then return 0 end
redis.call("zrem", holders, ARGV[1])
redis.call("zadd", holders, now + ttl, ARGV[2])
if redis.call("pttl", holders) < ttl then redis.call("pexpire", holders, ttl) end
return 1
`);
