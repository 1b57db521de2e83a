/**
 * Maps of at most a given number of entries. A process's memory is shared by every account, so
 * every map keyed by what clients or receivers choose (addresses, API keys, webhooks) is bounded;
 * this is the one way the services bound one.
 */

/**
 * Sets `key` to `value` in `map` as its newest entry (a Map iterates in insertion order, so its
 * first entries are the least recently set), then, past `max` entries, forgets the oldest ones:
 * down to `max` less a 64th of it, through one iterator. Forgetting one entry per insertion would
 * make each insertion into a full Map walk the deleted entries left at its front (V8 compacts a
 * Map's table only when it grows), on the paths a flood of new addresses or keys takes; forgetting
 * a 64th at once spreads that walk over as many insertions.
 */
export function setNewest<K, V>(map: Map<K, V>, key: K, value: V, max: number): void {
  map.delete(key);
  map.set(key, value);
  if (map.size <= max) return;
  let excess = map.size - max + Math.floor(max / 64);
  for (const oldest of map.keys()) {
    if (excess-- <= 0) break;
    map.delete(oldest);
  }
}
