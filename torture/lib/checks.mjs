/**
 * A run's verdict is a list of named checks, each with what was expected and what was observed.
 * A run passes when every check passes; the report shows the failing ones by name.
 */
export class Checks {
  /** @type {{ name: string, pass: boolean, expected: string, observed: string }[]} */
  list = [];

  /** Records one check. */
  add(name, pass, expected, observed) {
    this.list.push({ name, pass: Boolean(pass), expected: String(expected), observed: String(observed) });
    return pass;
  }

  /** `observed === expected`. */
  equal(name, observed, expected) {
    return this.add(name, observed === expected, expected, observed);
  }

  /** `observed <= bound`. */
  atMost(name, observed, bound, unit = "") {
    return this.add(name, Number.isFinite(observed) && observed <= bound, `≤ ${bound}${unit}`, `${observed}${unit}`);
  }

  /** `observed >= bound`. */
  atLeast(name, observed, bound, unit = "") {
    return this.add(name, Number.isFinite(observed) && observed >= bound, `≥ ${bound}${unit}`, `${observed}${unit}`);
  }

  /** `value` is one of `allowed`. */
  oneOf(name, value, allowed) {
    return this.add(name, allowed.includes(value), allowed.join(" or "), value);
  }

  /** A check that could not even be evaluated (an error, a timeout). */
  fail(name, expected, observed) {
    return this.add(name, false, expected, observed);
  }

  get passed() {
    return this.list.every((check) => check.pass);
  }

  get failures() {
    return this.list.filter((check) => !check.pass);
  }
}

/**
 * C1: no two holders inside at once — for a counted lock, never more permits in use than its limit
 * (`name` then says so).
 */
export function checkNoOverlap(checks, history, name = "C1 no overlap") {
  const first = history.overlaps[0];
  const detail = first === undefined ? "" : ` (first: ${JSON.stringify(first)})`;
  return checks.add(name, history.overlaps.length === 0, "0 overlaps", `${history.overlaps.length}${detail}`);
}

/** C2: the counter equals the number of completed sections. */
export function checkNoLostUpdates(checks, history) {
  return checks.add(
    "C2 no lost update",
    history.lostUpdates === 0,
    `counter = completed sections`,
    `counter ${history.counter}, completed ${history.completed}`,
  );
}

/** C3: the fenced resource accepted no stale write. */
export function checkNoStaleAccepted(checks, history) {
  const { staleAccepted, staleRejected } = history.fenced;
  const first = history.staleAcceptedRecords[0];
  return checks.add(
    "C3 every stale write rejected",
    staleAccepted === 0,
    "0 stale writes accepted",
    `${staleAccepted} accepted, ${staleRejected} rejected${first ? ` (first: ${JSON.stringify(first)})` : ""}`,
  );
}

/** Every overlap record has `holderId` among its parties (the faulty holder caused all of them). */
export function overlapsOnlyWith(history, holderId) {
  return history.overlaps.every(
    (record) => record.entrant?.holder === holderId || record.holders.some((h) => h.holder === holderId),
  );
}

/**
 * Overlap records that `holderId` does not explain: without its weight, the others inside would
 * still exceed the limit (a third party overlapping the successor while the stale holder is in).
 * Records of entries that did not involve `holderId` at all count too.
 */
export function overlapsNotExplainedBy(history, holderId) {
  return history.overlaps.filter((record) => {
    const parties = record.holders.some((h) => h.holder === record.entrant?.holder)
      ? record.holders
      : [...record.holders, record.entrant];
    const others = parties.filter((h) => h.holder !== holderId);
    if (others.length === parties.length) return true;
    const used = others.reduce((total, h) => total + (Number(h.weight) || 1), 0);
    return used > (record.limit ?? 1);
  });
}

/** The code of a StoreUnavailableError: the one failure a store fault may cause an acquisition. */
export const STORE_UNAVAILABLE = "ERR_GLOBALLOCK_STORE_UNAVAILABLE";

/**
 * Every acquisition that failed in `events` failed with a typed StoreUnavailableError (never a
 * timeout of the caller's wait, never an untyped error). Resolves to `{ typed, other }` counts.
 */
export function checkTypedAcquireErrors(checks, events) {
  const errors = events.filter((e) => e.type === "acquireError");
  const other = errors.filter((e) => e.code !== STORE_UNAVAILABLE);
  checks.add(
    "acquire failures are typed StoreUnavailableError",
    other.length === 0,
    `all ${STORE_UNAVAILABLE}`,
    other.length === 0 ? `${errors.length} typed` : `${other[0].code}: ${other[0].message}`,
  );
  return { typed: errors.length - other.length, other: other.length };
}
