import type { Queueing } from "../backend.js";
import type { ScriptArgument } from "./client/redis-connection.js";
import { defineScript } from "./script-runner.js";
import { COUNT_LIVE, nextFence, PARSE_REGISTRATION, PUBLISH_GRANT } from "./scripts.js";

/*
 * Lua scripts of counted locks: semaphores and read-write locks (a reader takes one permit of a
 * huge limit, a writer takes all of them). They mirror the lock scripts of scripts.ts — same KEYS
 * and ARGV, plus the limit (the attempt packs its ARGV tighter: see ACQUIRE_PERMITS) — so one
 * store and one locker core run both.
 *
 * A key's holders are a sorted set: member = the holder's token, with ".<weight>" appended when it
 * takes more than one permit; score = its deadline in server ms. Entries expire on their own: a
 * script that finds members whose deadline passed drops them, so a crashed holder's permits come
 * back after its lease, and the set itself expires with its latest deadline (every script keeps
 * the set's TTL at least as long as its latest score, so a score never outlives its set).
 *
 * The grant queue is the lock's (arrival-ordered sorted set of waiter ids plus a hash of each
 * waiter's "<liveness deadline>:<token>:<grant channel>"), served strictly first in, first out: an attempt takes
 * permits only when no live waiter is queued ahead of it, and a release (or a waiter that leaves)
 * grants permits to queued waiters from the head for as long as they fit, stopping at the first one
 * that does not. So a heavy waiter is never overtaken by lighter ones queued behind it. A grant
 * adds the waiter's registered token with a deadline of the hand-off grace and tells the waiter
 * on its grant channel, as for locks.
 *
 * Marks, so that nobody waiting costs no queue command: while a live waiter is queued, the set
 * also holds
 * - QUEUE_MARK (":q"), scored with the latest liveness deadline of a waiter that joined: an
 *   attempt that does not find it live knows nobody live is queued, without reading the queue;
 * - a HOLDER_MARK (":w:<token>") beside every live holder, with the holder's score (added,
 *   extended, adopted and dropped with it): a release removes "<token>" and ":w:<token>" in one
 *   ZREM, no script, and only when it removed both does it run GRANT_PERMITS. A release likely to
 *   find waiters (see `LockHandle.contended`) runs both in one script instead
 *   (RELEASE_CONTENDED_PERMITS): one round trip before the next waiter hears of its grant.
 * A waiter that joins marks the queue and every live holder; a holder added while the queue may
 * hold someone is marked with it; the marks go when a grant finds the queue empty. Tokens never
 * start with ":" (encodeURIComponent escapes it), so marks are never taken for holders.
 */

const PERMITS = `${PARSE_REGISTRATION}${PUBLISH_GRANT}
local now_us, now
-- Reads the server clock, once per script.
local function clock()
  local t = redis.call("time")
  now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  now = math.floor(now_us / 1000)
end

local function weight_of(member)
  local w = string.match(member, "%.(%d+)$")
  if w then return tonumber(w) end
  return 1
end

-- One read of the set (dropping members whose deadline passed, when there are any): the permits
-- live holders take, the latest score (the set lives at least until then), the earliest live
-- holder's deadline (nil: none), and whether the queue mark is live.
local function scan(holders)
  local entries = redis.call("zrange", holders, 0, -1, "WITHSCORES")
  local used, latest, earliest, queued, expired = 0, now, nil, false, false
  for i = 1, #entries, 2 do
    local member, deadline = entries[i], tonumber(entries[i + 1])
    if deadline <= now then
      expired = true
    else
      if deadline > latest then latest = deadline end
      if string.byte(member, 1) ~= 58 then
        used = used + weight_of(member)
        if not earliest or deadline < earliest then earliest = deadline end
      elseif member == ":q" then
        queued = true
      end
    end
  end
  if expired then redis.call("zremrangebyscore", holders, "-inf", now) end
  return used, latest, earliest, queued
end

-- ZADD/ZREM of many members, a few at a time (Lua's unpack has a limit).
local function call_chunked(command, key, args)
  for i = 1, #args, 200 do
    redis.call(command, key, unpack(args, i, math.min(i + 199, #args)))
  end
end

-- Adds a holder until now + ttl (and its mark when the queue may hold someone); keeps the set
-- alive until its latest score. Returns the new latest score.
local function add_holder(holders, member, ttl, latest, mark)
  local deadline = now + ttl
  if mark then
    redis.call("zadd", holders, deadline, member, deadline, ":w:" .. member)
  else
    redis.call("zadd", holders, deadline, member)
  end
  if deadline > latest then
    redis.call("pexpire", holders, ttl)
    return deadline
  end
  return latest
end

-- A waiter joined, live until live_until: marks the queue and every live holder not marked yet.
local function mark_queue(holders, live_until)
  local entries = redis.call("zrange", holders, 0, -1, "WITHSCORES")
  local marked, latest = {}, now
  for i = 1, #entries, 2 do
    local member, deadline = entries[i], tonumber(entries[i + 1])
    if deadline > latest then latest = deadline end
    if member == ":q" then
      if deadline > live_until then live_until = deadline end
    elseif string.sub(member, 1, 3) == ":w:" then
      marked[string.sub(member, 4)] = true
    end
  end
  local args = { live_until, ":q" }
  for i = 1, #entries, 2 do
    local member = entries[i]
    if string.byte(member, 1) ~= 58 and not marked[member] and tonumber(entries[i + 1]) > now then
      args[#args + 1] = entries[i + 1]
      args[#args + 1] = ":w:" .. member
    end
  end
  call_chunked("zadd", holders, args)
  if live_until > latest then redis.call("pexpire", holders, live_until - now) end
end

-- The queue is empty: drops the queue mark and every holder's mark.
local function clear_marks(holders)
  local marks = {}
  for _, member in ipairs(redis.call("zrange", holders, 0, -1)) do
    if string.byte(member, 1) == 58 then marks[#marks + 1] = member end
  end
  if #marks > 0 then call_chunked("zrem", holders, marks) end
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

-- Grants permits to queued waiters from the head while they fit; drops the marks when it empties
-- the queue. Returns the first id granted, or "".
local function admit(holders, queue, alive, limit, grace, used, latest)
  local first = ""
  local head = redis.call("zrange", queue, 0, 0)[1]
  while head do
    local token, channel = live_token(queue, alive, head)
    if token then
      local weight = weight_of(token)
      if used + weight > limit then return first end
      redis.call("zrem", queue, head)
      redis.call("hdel", alive, head)
      latest = add_holder(holders, token, grace, latest, true)
      publish_grant(holders, head, token, channel, now)
      used = used + weight
      if first == "" then first = head end
    end
    head = redis.call("zrange", queue, 0, 0)[1]
  end
  clear_marks(holders)
  return first
end
`;

/** Lua: the next fencing token (see `nextFence`; here after PERMITS, whose clock() reads the time). */
const NEXT_FENCE = nextFence("now_us");

/** A holder's mark in its set (see the marks above): what a release removes with the holder. */
export const HOLDER_MARK = ":w:";

/**
 * One attempt to take permits. KEYS: holders, queue, liveness, and the fencing counter when a
 * token is wanted. ARGV (built by {@link acquirePermitsArguments}: few arguments, so that a call
 * costs the client little to build and send): token (with its weight), ttl (ms), waiter id ("" =
 * not queued), mode (see {@link acquireMode}: bit 1 "join" the queue on failure, bit 2 "leave" it
 * on success), the store's settings (see {@link permitSettings}: liveness window (ms), limit,
 * hand-off grace (ms), fencing counter TTL (ms) and the locker's grant channel, in one string),
 * then the claim token when there is one (a registration of this locker that may have been
 * granted permits; absent = none).
 * Returns 0 when acquired, 2 when acquired with waiters possibly queued (the holder was marked:
 * its release is contended), the fencing token as a string when asked for; else { ms until the
 * earliest holder's deadline (>= 1), server ms when it registered (0 when it did not join) }.
 * Nobody queued and nothing expired: TIME, one ZRANGE, one ZADD (and a PEXPIRE when the set's
 * TTL is shorter than the new lease).
 */
export const ACQUIRE_PERMITS = defineScript(`${PERMITS}${NEXT_FENCE}
clock()
local holders, queue, alive = KEYS[1], KEYS[2], KEYS[3]
local token, ttl, id, mode = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local window, limit, grace, fence_ttl, channel = string.match(ARGV[5], "^(%S+) (%S+) (%S+) (%S+) (.*)$")
window, limit, grace = tonumber(window), tonumber(limit), tonumber(grace)
local claim = ARGV[6] or ""
local join, leave = mode % 2 == 1, mode >= 2
local used, latest, earliest, queued = scan(holders)
local claimed = false
local ahead = false
if claim ~= "" and redis.call("zscore", holders, claim) then
  -- Granted to this locker already: its turn has come, whatever is queued now.
  redis.call("zrem", holders, claim, ":w:" .. claim)
  used = used - weight_of(claim)
  claimed = true
  queued = true
elseif queued then
  local head = redis.call("zrange", queue, 0, 0)[1]
  queued = head ~= nil
  -- A queue mark left by a queue that emptied without a grant (its waiters gave up): dropped.
  if not queued then clear_marks(holders) end
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
  if queued and id ~= "" and leave then
    redis.call("zrem", queue, id)
    redis.call("hdel", alive, id)
  end
  latest = add_holder(holders, token, ttl, latest, queued)
  -- Permits freed by expired holders (nobody's release granted them): the queue may fit in too.
  if queued then admit(holders, queue, alive, limit, grace, used + weight, latest) end
  if KEYS[4] then return next_fence(KEYS[4], fence_ttl) end
  if queued then return 2 end
  return 0
end
if claimed then admit(holders, queue, alive, limit, grace, used, latest) end
local registered = 0
if id ~= "" and join then
  registered = now
  redis.call("zadd", queue, "NX", now_us, id)
  redis.call("hset", alive, id, (now + window) .. ":" .. token .. ":" .. channel)
  redis.call("pexpire", queue, window)
  redis.call("pexpire", alive, window)
  mark_queue(holders, now + window)
end
local retry = 1
if earliest and earliest - now > retry then retry = earliest - now end
return { retry, registered }
`);

/** The modes of {@link ACQUIRE_PERMITS} (see {@link acquireMode}), as sent. */
const ACQUIRE_MODES: readonly string[] = ["0", "1", "2", "3"];

/**
 * The mode argument of {@link ACQUIRE_PERMITS} for `queueing`: 1 when it joins the queue on failure,
 * plus 2 when it leaves the queue on success ("0" to "3").
 */
export function acquireMode(queueing: Queueing): string {
  return ACQUIRE_MODES[(queueing.joinOnMiss ? 1 : 0) + (queueing.leaveOnSuccess ? 2 : 0)] as string;
}

/**
 * The settings argument of {@link ACQUIRE_PERMITS}: what a store sends with every attempt, built
 * once per store. The channel goes last: it may hold spaces (it starts with the caller's prefix).
 */
export function permitSettings(
  livenessWindow: number,
  limit: number,
  grantGrace: number,
  fencingCounterTtl: number,
  grantChannel: string,
): string {
  return `${livenessWindow} ${limit} ${grantGrace} ${fencingCounterTtl} ${grantChannel}`;
}

/**
 * ARGV of one {@link ACQUIRE_PERMITS} call: `waiterId` "" when the attempt is not queued,
 * `settings` from {@link permitSettings}.
 */
export function acquirePermitsArguments(
  token: string,
  ttl: number,
  waiterId: string,
  queueing: Queueing,
  settings: string,
): ScriptArgument[] {
  const mode = acquireMode(queueing);
  const claim = queueing.grantedToken;
  return claim === undefined || claim === ""
    ? [token, ttl, waiterId, mode, settings]
    : [token, ttl, waiterId, mode, settings, claim];
}

/**
 * Extends many holders (one node, one Cluster slot) while each is still in its set and not past
 * its deadline (its mark, if any, with it). KEYS: the holders' sets (repeated for holders of one
 * key). ARGV: ttl, then the tokens, one per key, separated by spaces. Returns one character per
 * key: "1" extended, "0" gone.
 */
export const EXTEND_PERMITS = defineScript(`${PERMITS}
clock()
local ttl, tokens = tonumber(ARGV[1]), ARGV[2]
local out = {}
local from = 1
for i, key in ipairs(KEYS) do
  local stop = string.find(tokens, " ", from, true) or 0
  local member = string.sub(tokens, from, stop - 1)
  from = stop + 1
  local score = redis.call("zscore", key, member)
  if score and tonumber(score) > now then
    redis.call("zadd", key, "XX", now + ttl, member, now + ttl, ":w:" .. member)
    if redis.call("pttl", key) < ttl then redis.call("pexpire", key, ttl) end
    out[i] = "1"
  else
    if score then redis.call("zrem", key, member, ":w:" .. member) end
    out[i] = "0"
  end
end
return table.concat(out)
`);

/**
 * Releases a holder's permits and grants them on (see admit): the full release, for a holder
 * whose lease may have run out (the store removes a holder still valid with one ZREM, see
 * GRANT_PERMITS). KEYS: holders, queue, liveness. ARGV: token, grace (ms), limit. Returns
 * { 1 released | 0 already gone or expired, first waiter id granted or "" }.
 */
export const RELEASE_PERMITS = defineScript(`${PERMITS}
clock()
local holders, queue, alive = KEYS[1], KEYS[2], KEYS[3]
local score = redis.call("zscore", holders, ARGV[1])
if not score then return { 0, "" } end
redis.call("zrem", holders, ARGV[1], ":w:" .. ARGV[1])
local first = ""
local used, latest, _, queued = scan(holders)
if queued then first = admit(holders, queue, alive, tonumber(ARGV[3]), tonumber(ARGV[2]), used, latest) end
if tonumber(score) <= now then return { 0, first } end
return { 1, first }
`);

/**
 * Grants permits a release freed (its ZREM removed a marked holder: someone may be queued) to
 * queued waiters (see admit). KEYS: holders, queue, liveness. ARGV: grace (ms), limit. Returns the
 * first waiter id granted, or "".
 */
export const GRANT_PERMITS = defineScript(`${PERMITS}
clock()
local holders, queue, alive = KEYS[1], KEYS[2], KEYS[3]
local used, latest = scan(holders)
return admit(holders, queue, alive, tonumber(ARGV[2]), tonumber(ARGV[1]), used, latest)
`);

/**
 * The release of a valid holder that may have waiters queued behind it, in one round trip: the
 * ZREM of the lean release (the holder and its mark) and, when it removed both, GRANT_PERMITS's
 * grant, in one script. The store sends it instead of the lean release when the core says the
 * lease is contended (see `LockHandle.contended`): a lean release would be two round trips before
 * the next waiter hears of its grant. KEYS: holders, queue, liveness. ARGV: token, grace (ms),
 * limit. Returns { members removed (0, 1 or 2), first waiter id granted or "" }.
 */
export const RELEASE_CONTENDED_PERMITS = defineScript(`${PERMITS}
local holders, queue, alive = KEYS[1], KEYS[2], KEYS[3]
local removed = redis.call("zrem", holders, ARGV[1], ":w:" .. ARGV[1])
if removed ~= 2 then return { removed, "" } end
clock()
local used, latest = scan(holders)
return { 2, admit(holders, queue, alive, tonumber(ARGV[3]), tonumber(ARGV[2]), used, latest) }
`);

/**
 * Leaves a key's queue; permits granted to the leaver's registration meanwhile are given back.
 * Either may let the waiters behind it in (a heavy head that leaves unblocks lighter ones).
 * KEYS: holders, queue, liveness. ARGV: waiter id, claim token ("" = none), grace, limit.
 */
export const LEAVE_PERMIT_QUEUE = defineScript(`${PERMITS}
clock()
local holders, queue, alive = KEYS[1], KEYS[2], KEYS[3]
redis.call("zrem", queue, ARGV[1])
redis.call("hdel", alive, ARGV[1])
if ARGV[2] ~= "" then redis.call("zrem", holders, ARGV[2], ":w:" .. ARGV[2]) end
local used, latest = scan(holders)
admit(holders, queue, alive, tonumber(ARGV[4]), tonumber(ARGV[3]), used, latest)
return 1
`);

/**
 * A fencing token for a holder, only while it holds its permits. KEYS: holders, counter. ARGV:
 * token, counter TTL (ms). Returns the token as a decimal string, or nil.
 */
export const ISSUE_PERMIT_FENCING_TOKEN = defineScript(`${PERMITS}${NEXT_FENCE}
clock()
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
local entries = redis.call("zrangebyscore", KEYS[1], "(" .. now, "+inf", "WITHSCORES")
for i = 1, #entries, 2 do
  -- Marks (see above) are not holders.
  if string.byte(entries[i], 1) ~= 58 then
    out[#out + 1] = entries[i]
    out[#out + 1] = entries[i + 1]
  end
end
return out
`);

/**
 * Takes over a handed-off holder: where the member ARGV[1] is still in the set and not past its
 * deadline, replaces it by ARGV[2] with a deadline ARGV[3] ms from now (the set lives at least as
 * long), and its mark with it. The queue and the fencing counter are left as they are. Also
 * undoes an adoption (the members swapped). KEYS: holders. Returns 1 swapped | 0 gone or expired (a member is unique to
 * its holder: nobody else can hold it).
 */
export const ADOPT_PERMITS = defineScript(`
local t = redis.call("time")
local now = math.floor((tonumber(t[1]) * 1000000 + tonumber(t[2])) / 1000)
local holders, ttl = KEYS[1], tonumber(ARGV[3])
local score = redis.call("zscore", holders, ARGV[1])
if not score or tonumber(score) <= now then return 0 end
redis.call("zrem", holders, ARGV[1])
-- A marked holder (someone may be queued) stays marked.
if redis.call("zrem", holders, ":w:" .. ARGV[1]) == 1 then
  redis.call("zadd", holders, now + ttl, ARGV[2], now + ttl, ":w:" .. ARGV[2])
else
  redis.call("zadd", holders, now + ttl, ARGV[2])
end
if redis.call("pttl", holders) < ttl then redis.call("pexpire", holders, ttl) end
return 1
`);
