/**
 * A crowd on one store for the contract suites' crowd tests: `first` and `size - 1` peers of it,
 * all wake-only (safety-net polls so slow that a wake-up lost on the way shows as a timeout).
 */
export async function wakeOnlyCrowd<T>(
  first: T,
  size: number,
  peer: (of: T, options: { wakeOnly: true }) => Promise<T>,
): Promise<T[]> {
  return [first, ...(await Promise.all(Array.from({ length: size - 1 }, () => peer(first, { wakeOnly: true }))))];
}
