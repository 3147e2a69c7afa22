/**
 * A small seeded pseudo-random generator, so that every run of a scenario with a given seed draws
 * the same workload (hold times, keys, jitter, which worker is the victim). The interleaving of
 * processes is still up to the scheduler: seeds fix the workload, not the schedule.
 *
 * The generator walks a 32-bit Weyl sequence (a fixed odd increment) and scrambles each state with
 * an avalanche mix of xor-shifts and multiplications; it is fast, has a period of 2^32, and is
 * plenty for choosing test inputs (it is not for cryptography).
 */

const INCREMENT = 0x9e3779b9; // odd, close to 2^32 / golden ratio

/** Scrambles a 32-bit integer so that nearby inputs give unrelated outputs. */
function scramble(value) {
  let z = value >>> 0;
  z = Math.imul(z ^ (z >>> 15), 0x2c1b3c6d);
  z = Math.imul(z ^ (z >>> 12), 0x297a2d39);
  return (z ^ (z >>> 15)) >>> 0;
}

/** Combines a seed with a label (e.g. a worker index) into a new, independent seed. */
export function deriveSeed(seed, label) {
  let hash = scramble(seed ^ 0x5bd1e995);
  for (const char of String(label)) hash = scramble(hash ^ char.charCodeAt(0));
  return hash;
}

/** A seeded generator with the few draws the torture suite needs. */
export class Prng {
  #state;

  /** @param {number} seed any integer */
  constructor(seed) {
    this.#state = scramble(seed) >>> 0;
  }

  /** A float in [0, 1). */
  next() {
    this.#state = (this.#state + INCREMENT) >>> 0;
    return scramble(this.#state) / 2 ** 32;
  }

  /** An integer in [min, max] (both included). */
  int(min, max) {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** One element of a non-empty array. */
  pick(items) {
    return items[Math.floor(this.next() * items.length)];
  }
}
