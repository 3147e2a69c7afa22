/** One holder of a key's permits. */
export interface Holder {
  readonly weight: number;
  /** `performance.now()` at which it expires; `Infinity`: held until released. */
  readonly deadline: number;
  /** The latest fencing token issued to it, if it was fenced (shown by `inspect`). */
  readonly fencingToken?: bigint;
}

/**
 * A key's holders by token. The first is kept in fields and the rest in a map made on first use,
 * so a lock's holder (one at a time, under a new token each grant) costs no map entry: a hand-off
 * or an uncontended pair inserts and deletes none (a small Map whose keys keep changing rebuilds
 * its table every few operations).
 */
export class Holders {
  #firstToken = "";
  #first: Holder | undefined;
  #more: Map<string, Holder> | undefined;
  /** How many hold the key. */
  size = 0;

  /** The holder with `token`, if it holds the key. */
  get(token: string): Holder | undefined {
    return this.#first !== undefined && token === this.#firstToken ? this.#first : this.#more?.get(token);
  }

  /** Adds `holder` under `token` (a fresh token: no holder has it). */
  add(token: string, holder: Holder): void {
    this.size += 1;
    if (this.#first === undefined) {
      this.#firstToken = token;
      this.#first = holder;
    } else {
      this.#more ??= new Map();
      this.#more.set(token, holder);
    }
  }

  /** Replaces the record of the holder with `token` (which holds the key). */
  replace(token: string, holder: Holder): void {
    if (this.#first !== undefined && token === this.#firstToken) this.#first = holder;
    else this.#more?.set(token, holder);
  }

  /** Removes the holder with `token` and returns it, if there is one. */
  delete(token: string): Holder | undefined {
    const first = this.#first;
    if (first !== undefined && token === this.#firstToken) {
      this.#first = undefined;
      this.#firstToken = "";
      this.size -= 1;
      return first;
    }
    const holder = this.#more?.get(token);
    if (holder === undefined) return undefined;
    this.#more?.delete(token);
    this.size -= 1;
    return holder;
  }

  /** Every holder with its token (a snapshot: the caller may delete while going through it). */
  entries(): Array<[string, Holder]> {
    const all: Array<[string, Holder]> = this.#first === undefined ? [] : [[this.#firstToken, this.#first]];
    if (this.#more !== undefined) all.push(...this.#more);
    return all;
  }
}
