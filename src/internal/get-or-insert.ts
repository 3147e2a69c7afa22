/**
 * The value of `key` in `map`; when it has none, `make()`'s, stored there first. What
 * `Map.prototype.getOrInsertComputed` (TC39's upsert proposal) does, which Node.js 20 lacks.
 */
export function getOrInsert<K, V>(map: Map<K, V>, key: K, make: () => NoInfer<V>): V {
  let value = map.get(key);
  if (value === undefined) {
    value = make();
    map.set(key, value);
  }
  return value;
}
