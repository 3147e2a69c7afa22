/**
 * The referee: a redis-server that no fault ever touches, where workers record what they do inside
 * their critical sections, and where the checkers read the history afterwards. All keys of one run
 * live under a namespace. Per lock key `k`:
 *
 * - `inside:k`   (C1) permits in use: incremented by the holder's weight on entry (1 for a lock),
 *                decremented on exit; above the limit (1 for a lock) means too many holders at once;
 * - `holders:k`  who is inside now (holder id → entry record, with its weight and role), to name
 *                the parties of an overlap;
 * - `overlaps`   (C1) one JSON record per entry that took `inside` above the limit (who, when);
 * - `roles:k`    holders inside now per role ("read", "write"; counted locks with roles only);
 * - `peaks:k`    the most ever inside at once: `permits` (of `inside`), `holders`, and per role;
 * - `shared:k`   sections that completed without the C2 counter (semaphore holders, readers);
 * - `counter:k`  (C2) a counter updated with a non-atomic read, pause, write;
 * - `completed:k`(C2) sections whose write happened (set in the same MULTI as the write);
 * - `granted:k`  (C3) the highest fencing token that has entered a section (registered on entry);
 * - `resource:k` (C3) the fenced resource, written with the library's `fencedWrite`;
 * - `fence`      (C3) counts of fenced writes by class (stale/current) and result (accepted/rejected);
 * - `stale-accepted` (C3) one JSON record per stale write that the resource accepted (a violation).
 *
 * A write is *stale* when, before it was sent, a higher token had already been registered — and a
 * holder registers only after its own first fenced write (its "claim"), so by then the resource has
 * seen that higher token and must refuse the stale one.
 */

/**
 * Entry into a critical section, atomically: add the holder's weight to the permits in use,
 * remember who is inside, record an overlap with everyone inside if that exceeds the limit (with
 * the referee's clock), keep the peaks, and register the fencing token. A lock is weight 1, limit 1.
 * KEYS: inside, holders, overlaps, granted, peaks, roles. ARGV: holder id, entry record (JSON
 * object), token or "", weight, limit, role or "".
 */
const ENTER = `
local n = redis.call("incrby", KEYS[1], tonumber(ARGV[4]))
redis.call("hset", KEYS[2], ARGV[1], ARGV[2])
local function peak(field, value)
  if value > tonumber(redis.call("hget", KEYS[5], field) or "0") then redis.call("hset", KEYS[5], field, value) end
end
peak("permits", n)
peak("holders", redis.call("hlen", KEYS[2]))
if ARGV[6] ~= "" then peak(ARGV[6], redis.call("hincrby", KEYS[6], ARGV[6], 1)) end
if n > tonumber(ARGV[5]) then
  local t = redis.call("time")
  local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local holders = redis.call("hvals", KEYS[2])
  redis.call("rpush", KEYS[3], '{"at":' .. at .. ',"inside":' .. n .. ',"limit":' .. ARGV[5] .. ',"entrant":' .. ARGV[2] ..
    ',"holders":[' .. table.concat(holders, ",") .. ']}')
end
local token = ARGV[3]
if token ~= "" then
  local seen = redis.call("get", KEYS[4])
  if (not seen) or #token > #seen or (#token == #seen and token > seen) then
    redis.call("set", KEYS[4], token)
  end
end
return n
`;

/**
 * Exit from a critical section: forget the holder and give back its weight (from its entry record;
 * 1 when it has none), only if it was inside (so that the compensation for a killed holder and a
 * real exit can never both count). KEYS: inside, holders, roles. ARGV: holder id. Returns the new
 * count, or -1 when the holder was not inside.
 */
const EXIT = `
local record = redis.call("hget", KEYS[2], ARGV[1])
if not record then return -1 end
redis.call("hdel", KEYS[2], ARGV[1])
local entry = cjson.decode(record)
local role = entry.role
if type(role) == "string" and role ~= "" then redis.call("hincrby", KEYS[3], role, -1) end
return redis.call("decrby", KEYS[1], tonumber(entry.weight) or 1)
`;

/** A plain, unconditional write of the resource (only for the checker's control run). */
const UNFENCED_WRITE = `
redis.call("hset", KEYS[1], "fence", ARGV[1], "value", ARGV[2])
return 1
`;

/**
 * The referee weight of a read-write locker's writer: the limit its sections enter against, so a
 * writer with anyone (readers are weight 1), or two writers, exceed it.
 */
export const RW_WRITER_WEIGHT = 1000;

/** Compares two non-negative decimal strings numerically (exact beyond 2^53). */
export function compareTokens(a, b) {
  if (a.length !== b.length) return a.length < b.length ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Key names of one run on the referee. */
export class RefereeKeys {
  /** @param {string} namespace prefix of every key of the run, e.g. "torture:holder-paused:1:" */
  constructor(namespace) {
    this.namespace = namespace;
  }
  inside(key) {
    return `${this.namespace}inside:${key}`;
  }
  holders(key) {
    return `${this.namespace}holders:${key}`;
  }
  counter(key) {
    return `${this.namespace}counter:${key}`;
  }
  completed(key) {
    return `${this.namespace}completed:${key}`;
  }
  granted(key) {
    return `${this.namespace}granted:${key}`;
  }
  roles(key) {
    return `${this.namespace}roles:${key}`;
  }
  peaks(key) {
    return `${this.namespace}peaks:${key}`;
  }
  shared(key) {
    return `${this.namespace}shared:${key}`;
  }
  resource(key) {
    return `${this.namespace}resource:${key}`;
  }
  get overlaps() {
    return `${this.namespace}overlaps`;
  }
  get fence() {
    return `${this.namespace}fence`;
  }
  get staleAccepted() {
    return `${this.namespace}stale-accepted`;
  }
}

/** What a worker does on the referee, one method per step of its critical section. */
export class RefereeRecorder {
  /**
   * @param {import("ioredis").Redis} client a connection to the referee
   * @param {string} namespace the run's namespace
   */
  constructor(client, namespace) {
    this.client = client;
    this.keys = new RefereeKeys(namespace);
  }

  /**
   * C1 entry; resolves to the permits in use now, this holder's included. A lock's holder takes
   * weight 1 of limit 1; a counted lock's passes its weight, the limit and its role, if any.
   */
  async enter(key, holderId, entry, token, { weight = 1, limit = 1, role = "" } = {}) {
    const k = this.keys;
    const record = JSON.stringify(
      role === "" ? { holder: holderId, weight, ...entry } : { holder: holderId, weight, role, ...entry },
    );
    return Number(
      await this.client.eval(
        ENTER,
        6,
        k.inside(key),
        k.holders(key),
        k.overlaps,
        k.granted(key),
        k.peaks(key),
        k.roles(key),
        holderId,
        record,
        token ?? "",
        weight,
        limit,
        role,
      ),
    );
  }

  /** C1 exit; resolves to the permits in use after leaving (or -1 if this holder was not inside). */
  async exit(key, holderId) {
    return exitOf(this.client, this.keys, key, holderId);
  }

  /** A section that completed without the C2 counter (a semaphore holder's, a reader's). */
  async completeShared(key) {
    await this.client.incr(this.keys.shared(key));
  }

  /** C2 read. */
  async readCounter(key) {
    return Number((await this.client.get(this.keys.counter(key))) ?? "0");
  }

  /** C2 write, counted as a completed section in the same transaction. */
  async writeCounter(key, value) {
    await this.client.multi().set(this.keys.counter(key), String(value)).incr(this.keys.completed(key)).exec();
  }

  /** C3: the highest token registered so far for `key`, or null. */
  async highestGranted(key) {
    return this.client.get(this.keys.granted(key));
  }

  /** C3 control only: writes the resource ignoring tokens. Resolves to true (always accepted). */
  async unfencedWrite(key, token, value) {
    return (await this.client.eval(UNFENCED_WRITE, 1, this.keys.resource(key), token, value)) === 1;
  }

  /** C3 bookkeeping of one fenced write; a stale write that was accepted is also recorded in full. */
  async recordWrite(key, stale, accepted, detail) {
    const field = `${stale ? "stale" : "current"}-${accepted ? "accepted" : "rejected"}`;
    const pipeline = this.client.pipeline().hincrby(this.keys.fence, field, 1);
    if (stale && accepted) pipeline.rpush(this.keys.staleAccepted, JSON.stringify({ key, ...detail }));
    await pipeline.exec();
  }
}

/** What the parent reads and repairs on the referee. */
export class RefereeReader {
  /**
   * @param {import("ioredis").Redis} client a connection to the referee
   * @param {string} namespace the run's namespace
   */
  constructor(client, namespace) {
    this.client = client;
    this.keys = new RefereeKeys(namespace);
  }

  /** Overlap records so far (C1). */
  async overlaps() {
    return (await this.client.lrange(this.keys.overlaps, 0, -1)).map((line) => JSON.parse(line));
  }

  /** Holders inside `key` right now: holder id → entry record. */
  async holders(key) {
    const raw = await this.client.hgetall(this.keys.holders(key));
    return Object.fromEntries(Object.entries(raw).map(([id, record]) => [id, JSON.parse(record)]));
  }

  /** Sum of completed sections over `keys` (C2). */
  async completed(keys) {
    let total = 0;
    for (const key of keys) total += Number((await this.client.get(this.keys.completed(key))) ?? "0");
    return total;
  }

  /**
   * Removes a holder that was killed inside its section from the C1 bookkeeping, as its exit would
   * have. Must run before anyone else can enter (the killed holder's lock is still in place).
   */
  async forget(key, holderId) {
    return exitOf(this.client, this.keys, key, holderId);
  }

  /** The whole history of the run, summarised for the checkers. */
  async history(keys) {
    const k = this.keys;
    let completed = 0;
    let counter = 0;
    let shared = 0;
    /** The highest of each peak over the keys: permits, holders, and per role. */
    const peaks = {};
    const stillInside = {};
    for (const key of keys) {
      completed += Number((await this.client.get(k.completed(key))) ?? "0");
      counter += Number((await this.client.get(k.counter(key))) ?? "0");
      shared += Number((await this.client.get(k.shared(key))) ?? "0");
      for (const [field, value] of Object.entries(await this.client.hgetall(k.peaks(key)))) {
        peaks[field] = Math.max(peaks[field] ?? 0, Number(value));
      }
      const inside = Number((await this.client.get(k.inside(key))) ?? "0");
      if (inside !== 0) stillInside[key] = { inside, holders: await this.holders(key) };
    }
    const fence = await this.client.hgetall(k.fence);
    const count = (field) => Number(fence[field] ?? "0");
    const staleAccepted = (await this.client.lrange(k.staleAccepted, 0, -1)).map((line) => JSON.parse(line));
    return {
      overlaps: await this.overlaps(),
      completed,
      counter,
      lostUpdates: completed - counter,
      shared,
      peaks,
      stillInside,
      fenced: {
        staleRejected: count("stale-rejected"),
        staleAccepted: count("stale-accepted"),
        currentAccepted: count("current-accepted"),
        currentRejected: count("current-rejected"),
      },
      staleAcceptedRecords: staleAccepted,
    };
  }
}

/** The exit script for `holderId` on `key` (a worker's exit, or the parent's clean-up of a killed holder). */
async function exitOf(client, keys, key, holderId) {
  return Number(await client.eval(EXIT, 3, keys.inside(key), keys.holders(key), keys.roles(key), holderId));
}
