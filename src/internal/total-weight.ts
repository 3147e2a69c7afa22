/** The permits `holders` take together: the sum of their weights. */
export function totalWeight(holders: readonly { readonly weight: number }[]): number {
  let sum = 0;
  for (const holder of holders) sum += holder.weight;
  return sum;
}
