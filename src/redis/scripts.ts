import { defineScript } from "./script-runner.js";

/*
 * Lua scripts. Lock keys hold a token: its holder's owner, then 32 random hex characters (see
 * owner-token.ts). Every release deletes (or hands over) only while the token matches and, when
 * someone may be waiting, PUBLISHes in the same atomic step: a grant on the grantee's channel
 * (below) or, where a key has no grant queue, the released token on the key's own channel,
 * whose name is the lock key itself (pub/sub channels do not share the key space).
 *
 * The grant queue of a key (single node or Cluster only) is a sorted set of waiter ids by
 * arrival (server time in µs) plus a hash of each waiter's registration, "<liveness deadline in
 * server ms>:<token>:<grant channel>": the token of the waiter's latest attempt and the channel its
 * locker listens on for grants. Waiters refresh it whenever they try; a release skips (and drops)
 * waiters whose deadline passed and GRANTS the key to the first live one: it sets the key to that
 * waiter's registered token, with a TTL of the hand-off grace, and publishes
 * "g:<id>:<token>:<server ms>:<key>" on the waiter's grant channel — only the grantee's process
 * hears it, however many wait — so the waiter holds the lock without a claim round trip (its first
 * extension lengthens the TTL). A waiter that died while counted alive blocks the key for at most
 * the grace; one whose message was lost finds its own token in the key at its next attempt and
 * takes it.
 *
 * The waiters' mark. A release looks at the queue only when the lock's value says someone joined
 * it: a waiter that joins (ACQUIRE's join path) appends WAITERS_MARK to the holder's token (APPEND
 * keeps the TTL; tokens never contain the mark, see owner-token.ts), and a grant sets the
 * grantee's token marked while others are still queued. Every script that compares a holder's
 * token accepts it marked or not and keeps the mark when it puts another token there (a claim, an
 * adoption). So an uncontended release is GET and DEL, and the queue is read only when the mark
 * says so. Correctness never depends on the mark being absent: a stale mark (its waiters left or
 * died) costs one ZRANGE at the release, which finds the queue empty and deletes the key. A mark
 * missing while someone is queued can only follow a key that expired with waiters queued (a
 * newcomer's SET NX, or a queued waiter's, wrote an unmarked token: ACQUIRE marks it again when
 * that waiter saw others still queued); that release then deletes the key without a grant, and
 * the waiters take it at their next attempt — within their poll (backoffMax), the same safety net
 * as for a lost grant message — and each attempt that fails marks the value again.
 */

/** What a waiter that joins a key's grant queue appends to the holder's token (see above). */
export const WAITERS_MARK = "+";

/** Lua: the waiters' mark, and how to compare and carry it (see above). */
const MARKS = `
local MARK = "${WAITERS_MARK}"
-- Whether a lock's value (false when absent) holds token, marked or not.
local function holds(value, token)
  return value == token or value == token .. MARK
end
-- The mark a value carries ("" or MARK): kept when another token replaces its own.
local function mark_of(value)
  if value and string.sub(value, -1) == MARK then return MARK end
  return ""
end
`;

const NOW = `
local function now_us()
  local t = redis.call("time")
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
`;

/**
 * Lua: the next fencing token of a lock, max(server time in µs, last + 1), stored in its counter
 * for `ttl` ms; returned as a decimal string. `now` is the Lua expression of the time in µs.
 */
export function nextFence(now: string): string {
  return `
local function next_fence(counter, ttl)
  local last = tonumber(redis.call("get", counter) or "0")
  local token = string.format("%.0f", math.max(${now}, last + 1))
  redis.call("set", counter, token, "PX", ttl)
  return token
end
`;
}

/** Lua (needs NOW): {@link nextFence} reading the time. */
const NEXT_FENCE = nextFence("now_us()");

/**
 * Lua pattern of a registration "<liveness deadline>:<token>:<grant channel>" (tokens hold no
 * colon; the channel may): its captures are the deadline, the token and the channel.
 */
const REGISTRATION_PATTERN = `"^(%d+):([^:]*):(.*)$"`;

/**
 * Lua: splits a registration (see REGISTRATION_PATTERN) into the deadline, the token and the
 * channel; nil when it is malformed (its waiter is then dropped like one whose deadline passed).
 */
export const PARSE_REGISTRATION = `
local function parse_registration(entry)
  local deadline, token, channel = string.match(entry, ${REGISTRATION_PATTERN})
  if not deadline then return nil end
  return tonumber(deadline), token, channel
end
`;

/**
 * The Lua expression of the grant message "g:<waiter id>:<token>:<server ms>:<lock>" (the one
 * format `parseGrant` reads), from the Lua expressions of its parts.
 */
function grantMessage(id: string, token: string, serverMs: string, lock: string): string {
  return `"g:" .. ${id} .. ":" .. ${token} .. ":" .. ${serverMs} .. ":" .. ${lock}`;
}

/**
 * Lua: tells waiter \`id\` on its registered grant \`channel\` that it was granted \`lock\` with \`token\`
 * at server time \`now_ms\`.
 */
export const PUBLISH_GRANT = `
local function publish_grant(lock, id, token, channel, now_ms)
  redis.call("publish", channel, ${grantMessage("id", "token", "now_ms", "lock")})
end
`;

/**
 * One acquisition attempt on a single node. KEYS: lock, queue, liveness, and the fencing counter
 * when a fencing token is wanted: it is issued in the same step as the grant (as
 * ISSUE_FENCING_TOKEN does), so a fenced acquisition costs no extra round trip. ARGV: token, ttl (ms),
 * waiter id ("" = not queued), "join" to enter the queue on failure (and register this attempt's
 * token for a grant), on success "leave" (the queue) | "keep", liveness window (ms), claim token
 * ("" = none): the locker's registration that it has not seen granted — an attempt that finds the
 * key granted to it (the grant's message not read yet, or lost) takes it. Only the locker knows
 * whether one of its waiters already took a grant, so the script never guesses from the hash.
 * A free key costs one command (SET NX). ARGV[8]: the fencing counter's TTL (ms); the last ARGV:
 * the locker's grant channel (registered with the waiter).
 * Returns 0 when acquired (the fencing token as a decimal string when asked for), else { the
 * lock's remaining TTL in ms (>= 1), server time in ms when it registered (0 when it did not join) }.
 */
export const ACQUIRE = defineScript(`${MARKS}${NOW}${NEXT_FENCE}
local lock, queue, alive = KEYS[1], KEYS[2], KEYS[3]
local token, ttl, id, join, onSuccess, window = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6])
local acquired = redis.call("set", lock, token, "NX", "PX", ttl)
local current = false
if not acquired and ARGV[7] ~= "" then
  current = redis.call("get", lock)
  if holds(current, ARGV[7]) then
    -- The claim keeps the grant's mark: others may still be queued.
    redis.call("set", lock, token .. mark_of(current), "PX", ttl)
    acquired = true
  end
end
if acquired then
  if id ~= "" and onSuccess == "leave" then
    redis.call("zrem", queue, id)
    redis.call("hdel", alive, id)
    -- A waiter that took a free key (it expired with waiters queued) while others still wait:
    -- mark its token, so that its release hands the key on.
    if mark_of(current) == "" and redis.call("exists", queue) == 1 then redis.call("append", lock, MARK) end
  end
  if KEYS[4] then return next_fence(KEYS[4], ARGV[8]) end
  return 0
end
local registered = 0
if id ~= "" and join == "join" then
  local now = now_us()
  registered = math.floor(now / 1000)
  redis.call("zadd", queue, "NX", now, id)
  redis.call("hset", alive, id, (registered + window) .. ":" .. token .. ":" .. ARGV[#ARGV])
  redis.call("pexpire", queue, window)
  redis.call("pexpire", alive, window)
  -- Mark the holder's token (the key exists: SET NX failed): its release looks at the queue.
  if not current then current = redis.call("get", lock) end
  if current and mark_of(current) == "" then redis.call("append", lock, MARK) end
end
local left = redis.call("pttl", lock)
if left < 1 then left = 1 end
return { left, registered }
`);

/**
 * Lua, inlined in the loops of EXTEND_MANY and EXTEND_MANY_PACKED (a statement, not a function: a
 * Lua call per lock costs Redis measurably more per extension round, see docs/benchmarks.md):
 * extends lock `key` while it holds `token`, marked or not (see MARKS, written out here), and
 * answers in `out[i]`: "1" extended, "-" held by another token, "0" gone.
 */
const EXTEND_ONE = `
  local current = call("get", key)
  if current == token or current == token .. MARK then
    call("pexpire", key, ttl)
    out[i] = "1"
  elseif current then
    out[i] = "-"
  else
    out[i] = "0"
  end
`;

/**
 * Extends many locks of one node (one Cluster slot) at once, each only while it holds its own
 * token (never re-creating an expired key). KEYS: the locks. ARGV: ttl (ms), then the tokens, one
 * per key, separated by spaces (tokens never contain one). Returns one character per key: "1"
 * extended, "0" gone, "-" held by another token.
 */
export const EXTEND_MANY = defineScript(`${MARKS}
local ttl, tokens = ARGV[1], ARGV[2]
local find, sub, call = string.find, string.sub, redis.call
local out = {}
local from = 1
for i, key in ipairs(KEYS) do
  local stop = find(tokens, " ", from, true) or 0
  local token = sub(tokens, from, stop - 1)
${EXTEND_ONE}
  from = stop + 1
end
return table.concat(out)
`);

/**
 * {@link EXTEND_MANY} on one node (not a Cluster), with the keys in one argument: KEYS none; ARGV
 * ttl, the tokens separated by spaces, the keys separated by NUL bytes (a batch with a key that
 * holds a NUL byte is sent as EXTEND_MANY). Same answer.
 */
export const EXTEND_MANY_PACKED = defineScript(`${MARKS}
local ttl, tokens, keys = ARGV[1], ARGV[2], ARGV[3]
local find, sub, call = string.find, string.sub, redis.call
local out = {}
local from, at, i = 1, 1, 1
local last = #keys
while at <= last + 1 do
  local stop = find(tokens, " ", from, true) or 0
  local ends = find(keys, "\\0", at, true) or (last + 1)
  local key, token = sub(keys, at, ends - 1), sub(tokens, from, stop - 1)
${EXTEND_ONE}
  from, at, i = stop + 1, ends + 1, i + 1
end
return table.concat(out)
`);

/**
 * Puts locks back on a quorum node that lost them (restarted empty) while a majority still holds
 * them: set-if-absent with the holder's token, so another token is never overwritten. KEYS: the
 * locks. ARGV: ttl (ms), then one token per key. Returns the number of keys restored.
 */
export const RESTORE_MANY = defineScript(`
local restored = 0
for i, key in ipairs(KEYS) do
  if redis.call("set", key, ARGV[i + 1], "NX", "PX", ARGV[1]) then restored = restored + 1 end
end
return restored
`);

/**
 * Lua statements (need `MARK`, and locals `lock`, `queue` — nil on a quorum node — `alive`,
 * `grace` and `released`, the token given up): hand a key that its holder gives up to the first
 * live waiter of its queue — set it to
 * that waiter's registered token for `grace` ms (marked while others are still queued, so that the
 * grantee's release looks at the queue too), take the waiter out of the queue and tell it (the
 * message PUBLISH_GRANT describes) — or delete it. Waiters whose liveness deadline passed are
 * dropped on the way. With a queue every waiter of another process is in it, so nothing is
 * published when nobody is queued. Without a queue (a quorum node) it deletes the key and
 * publishes the token given up: anyone may take it. Every node of a quorum publishes that same
 * token, so a waiter hears the release once, not once per node (see `ReleaseNotifier`).
 * Leaves the id of the waiter it was granted to, or "", in the local `granted`.
 *
 * Written out where it runs, not as Lua functions: Lua makes a script's functions anew on every
 * run, which costs Redis measurably more on a grant's release. For the same reason the
 * registration is split by one pattern, and the grant's server milliseconds are written from
 * TIME's own strings rather than formatted from a number.
 */
const HAND_OVER = `
local granted = ""
if queue then
  local call = redis.call
  -- The first two: the head, and whether anyone is queued behind it (the grant's mark).
  local first = call("zrange", queue, 0, 1)
  local head = first[1]
  if head then
    local t = call("time")
    local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    while head do
      local entry = call("hget", alive, head)
      call("zrem", queue, head)
      call("hdel", alive, head)
      local deadline, token, channel
      if entry then deadline, token, channel = string.match(entry, ${REGISTRATION_PATTERN}) end
      if deadline and tonumber(deadline) > now_ms then
        local mark = ""
        if first[2] then mark = MARK end
        call("set", lock, token .. mark, "PX", grace)
        -- now_ms as text: the seconds, then the first three of the six microsecond digits.
        local us = t[2]
        local ms = t[1] .. string.sub(string.sub("000000", #us + 1) .. us, 1, 3)
        call("publish", channel, ${grantMessage("head", "token", "ms", "lock")})
        granted = head
        break
      end
      first = call("zrange", queue, 0, 1)
      head = first[1]
    end
  end
  if granted == "" then call("del", lock) end
else
  redis.call("del", lock)
  redis.call("publish", lock, released)
end
`;

/**
 * Releases a lock and hands it over (see HAND_OVER). An uncontended release runs GET and DEL only:
 * a token without the waiters' mark (see MARKS) means nobody joined the queue since it was set,
 * so there is nobody to hand the key to and nothing to publish. A marked token (someone joined;
 * perhaps left since) scans the queue. KEYS: lock, queue, liveness (the last two absent: no
 * queue). ARGV: token, grace (ms). Returns 1 released (to nobody) | 0 already gone | -1 another
 * token holds it, or { 1, the id of the waiter it was granted to } (a plain number when
 * uncontended: the cheapest reply to read).
 */
export const RELEASE = defineScript(`
local current = redis.call("get", KEYS[1])
if current == ARGV[1] and KEYS[2] then
  redis.call("del", KEYS[1])
  return 1
end
local MARK = "${WAITERS_MARK}"
if current ~= ARGV[1] and current ~= ARGV[1] .. MARK then
  if current then return -1 end
  return 0
end
local lock, queue, alive, grace, released = KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[1]
${HAND_OVER}
if granted == "" then return 1 end
return { 1, granted }
`);

/**
 * Leaves a key's grant queue. If the key was granted to the leaver's registration meanwhile
 * (the grant ran before the leave; its message was not acted on), it is handed over at once, in
 * the same step, instead of blocking everyone for the grace. KEYS: lock, queue, liveness. ARGV:
 * waiter id, the leaver's registration token not seen granted ("" = none), grace (ms).
 */
export const LEAVE_QUEUE = defineScript(`${MARKS}
redis.call("zrem", KEYS[2], ARGV[1])
redis.call("hdel", KEYS[3], ARGV[1])
if ARGV[2] ~= "" and holds(redis.call("get", KEYS[1]), ARGV[2]) then
  local lock, queue, alive, grace, released = KEYS[1], KEYS[2], KEYS[3], ARGV[3], ARGV[2]
${HAND_OVER}
end
return 1
`);

/**
 * Given to redlock (as a modifier of its own release script) for the multi-node quorum. redlock
 * runs it only to undo a failed attempt's minority grants: that frees nothing anyone waits for
 * (the holder still has its majority), so it does not publish — a publication here woke every
 * waiter at once after each failed attempt and kept contending processes in lock-step. Returns
 * the number of keys deleted, as redlock expects. (Quorum keys have no queue, so never the
 * waiters' mark; it accepts a marked token all the same, as every script does.)
 */
export const REDLOCK_RELEASE_SCRIPT = `${MARKS}
local count = 0
for _, key in ipairs(KEYS) do
  if holds(redis.call("get", key), ARGV[1]) then
    redis.call("del", key)
    count = count + 1
  end
end
return count
`;

/**
 * Lua: how many waiters of a key's grant queue are live (their liveness deadline, the first
 * field of their registration in hash `alive`, is after `now_ms`). Reads only.
 */
export const COUNT_LIVE = `
local function count_live(alive, now_ms)
  local live = 0
  for _, entry in ipairs(redis.call("hvals", alive)) do
    local deadline = tonumber(string.match(entry, "^(%d+):"))
    if deadline and deadline > now_ms then live = live + 1 end
  end
  return live
end
`;

/**
 * Reads a lock for `inspect`, changing nothing. KEYS: lock, and its queue and liveness keys when
 * it has them. Returns { the token ("" when free; without the waiters' mark, see MARKS), its PTTL
 * in ms (-1: no TTL), live queued waiters }.
 */
export const INSPECT = defineScript(`${MARKS}${COUNT_LIVE}
local value = redis.call("get", KEYS[1])
if not value then value = "" end
if mark_of(value) ~= "" then value = string.sub(value, 1, -2) end
local left = -2
if value ~= "" then left = redis.call("pttl", KEYS[1]) end
local waiting = 0
if KEYS[3] then
  local t = redis.call("time")
  waiting = count_live(KEYS[3], math.floor(tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000))
end
return { value, left, waiting }
`);

/**
 * Takes over a handed-off lock: where the key still holds ARGV[1], sets it to ARGV[2] with a TTL
 * of ARGV[3] ms (the queue, the waiters' mark and the fencing counter are left as they are: a
 * later release hands the key on as usual). Also undoes an adoption (the tokens swapped). KEYS:
 * lock. Returns 1 swapped | 0 the key is gone | -1 another token holds it.
 */
export const ADOPT = defineScript(`${MARKS}
local current = redis.call("get", KEYS[1])
if holds(current, ARGV[1]) then
  redis.call("set", KEYS[1], ARGV[2] .. mark_of(current), "PX", ARGV[3])
  return 1
end
if current then return -1 end
return 0
`);

/**
 * Issues a fencing token, only while the lock is held by ARGV[1]: max(server time in microseconds,
 * last token + 1). Time makes tokens keep rising across a restart that lost the counter; the
 * counter makes them strictly rising within a microsecond. Returns the token as a decimal string,
 * or nil when the lock is not held by ARGV[1]. KEYS: lock, counter. ARGV: token, counter TTL (ms).
 */
export const ISSUE_FENCING_TOKEN = defineScript(`${MARKS}${NOW}${NEXT_FENCE}
if not holds(redis.call("get", KEYS[1]), ARGV[1]) then return false end
return next_fence(KEYS[2], ARGV[2])
`);
