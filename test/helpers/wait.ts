/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `predicate` holds, checking every 10 ms; throws after `ms`. A condition, not a speed limit. */
export async function eventually(predicate: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`condition not reached within ${ms} ms`);
    await sleep(10);
  }
}

/**
 * How many callers `locker` has waiting (queued, or parked after a failed attempt): its
 * `waitingCount`, or for a locker in another process, what its `waiting()` asks the child.
 */
export async function waitingOf(locker: object): Promise<number> {
  const { waitingCount, waiting } = locker as { waitingCount?: unknown; waiting?: () => Promise<number> };
  if (typeof waitingCount === "number") return waitingCount;
  if (typeof waiting === "function") return waiting.call(locker);
  throw new Error(`${locker.constructor.name} reports no waitingCount`);
}

/**
 * Waits until exactly `count` callers are observably waiting in `locker`: how a test orders
 * arrivals ("the first waiter is queued, now the second comes") instead of sleeping and hoping a
 * loaded machine kept up. The deadline only turns a hang into a message before the test timeout.
 */
export async function untilWaiting(locker: object, count: number): Promise<void> {
  await eventually(async () => (await waitingOf(locker)) === count, 20_000);
}
