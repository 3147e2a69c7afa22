/**
 * The referee: a redis-server that no fault ever touches, where workers record what they do inside
 * their critical sections, and where the checkers read the history afterwards. All keys of one run
 * live under a namespace. Per lock key `k`:
 *
 * - `inside:k`   (C1) incremented on entry, decremented on exit: above 1 means two holders at once;
 * - `holders:k`  who is inside now (holder id → entry record), to name the parties of an overlap;
 * - `overlaps`   (C1) one JSON record per entry that found someone else inside (who, when);
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
 * Entry into a critical section, atomically: count, remember who is inside, record an overlap with
 * everyone inside if there is one (with the referee's clock), and register the fencing token.
 * KEYS: inside, holders, overlaps, granted. ARGV: holder id, entry record (JSON object), token or "".
 */
const ENTER = `
local n = redis.call("incr", KEYS[1])
redis.call("hset", KEYS[2], ARGV[1], ARGV[2])
if n > 1 then
  local t = redis.call("time")
  local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local holders = redis.call("hvals", KEYS[2])
  redis.call("rpush", KEYS[3], '{"at":' .. at .. ',"inside":' .. n .. ',"entrant":' .. ARGV[2] ..
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
 * Exit from a critical section: forget the holder and decrement, only if it was inside (so that the
 * compensation for a killed holder and a real exit can never both count). KEYS: inside, holders.
 * ARGV: holder id. Returns the new count, or -1 when the holder was not inside.
 */
const EXIT = `
if redis.call("hdel", KEYS[2], ARGV[1]) == 1 then return redis.call("decr", KEYS[1]) end
return -1
`;

/** A plain, unconditional write of the resource (only for the checker's control run). */
const UNFENCED_WRITE = `
redis.call("hset", KEYS[1], "fence", ARGV[1], "value", ARGV[2])
return 1
`;

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

  /** C1 entry; resolves to how many holders are inside now, this one included. */
  async enter(key, holderId, entry, token) {
    const k = this.keys;
    const record = JSON.stringify({ holder: holderId, ...entry });
    return Number(
      await this.client.eval(
        ENTER,
        4,
        k.inside(key),
        k.holders(key),
        k.overlaps,
        k.granted(key),
        holderId,
        record,
        token ?? "",
      ),
    );
  }

  /** C1 exit; resolves to the count after leaving (or -1 if this holder was not inside). */
  async exit(key, holderId) {
    return Number(await this.client.eval(EXIT, 2, this.keys.inside(key), this.keys.holders(key), holderId));
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
    return Number(await this.client.eval(EXIT, 2, this.keys.inside(key), this.keys.holders(key), holderId));
  }

  /** The whole history of the run, summarised for the checkers. */
  async history(keys) {
    const k = this.keys;
    let completed = 0;
    let counter = 0;
    const stillInside = {};
    for (const key of keys) {
      completed += Number((await this.client.get(k.completed(key))) ?? "0");
      counter += Number((await this.client.get(k.counter(key))) ?? "0");
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
