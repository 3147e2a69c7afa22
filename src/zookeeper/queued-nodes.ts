/** A node of a ZooKeeper locker: a holder's or a queued waiter's. */
export interface OwnNode {
  /** The key's node it lives under. */
  readonly resource: string;
  readonly path: string;
  /** The local deadline of its lease (while held). */
  validUntil: number;
  /** While it is a registration: the place in the key's queue it holds (see {@link QueuedNodes}). */
  place?: string | undefined;
}

/**
 * The nodes a ZooKeeper locker keeps queued as registrations (by registration token: their name),
 * one per place in a key's queue, as the core keeps one: a lock's locker has one place per key, a
 * counted waiter its own. A later registration of a place replaces the earlier one (an attempt
 * abandoned in flight may answer after its successor), whose node must go: it would otherwise
 * stand in the queue for nobody.
 */
export class QueuedNodes {
  /** Queued waiters' nodes, by registration token (their name). */
  readonly #queued = new Map<string, OwnNode>();
  /** The registration of each place (the queue entry's waiter id and the key). */
  readonly #registrations = new Map<string, string>();

  /** The queued node named `name`, if any. */
  get(name: string): OwnNode | undefined {
    return this.#queued.get(name);
  }

  /** Every queued node. */
  values(): IterableIterator<OwnNode> {
    return this.#queued.values();
  }

  /**
   * Queues `node` (named `name`) as the registration of `place`; answers the node it replaces (out
   * of the books now, still in ZooKeeper: the caller deletes it), if any.
   */
  register(node: OwnNode, name: string, place: string): OwnNode | undefined {
    const replaced = this.#registrations.get(place);
    const old = replaced !== undefined && replaced !== name ? this.unqueue(replaced) : undefined;
    node.place = place;
    this.#queued.set(name, node);
    this.#registrations.set(place, name);
    return old;
  }

  /** Takes the queued node named `name` out of the books (not out of ZooKeeper), if it is there. */
  unqueue(name: string): OwnNode | undefined {
    const node = this.#queued.get(name);
    if (node === undefined) return undefined;
    this.#queued.delete(name);
    if (node.place !== undefined && this.#registrations.get(node.place) === name) {
      this.#registrations.delete(node.place);
    }
    node.place = undefined;
    return node;
  }

  /** Forgets every queued node (their session is gone, or the locker closes). */
  clear(): void {
    this.#queued.clear();
    this.#registrations.clear();
  }
}
