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
