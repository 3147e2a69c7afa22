/** The links an item carries to sit in one {@link ChainList} at a time. */
export interface Chained<T extends Chained<T>> {
  prev: T | undefined;
  next: T | undefined;
}

/** The links an item carries to sit in one {@link IntrusiveList} at a time. */
export interface Linked<T extends Linked<T>> extends Chained<T> {
  /** The list the item is in, if any. */
  list: IntrusiveList<T> | undefined;
}

/**
 * A doubly-linked list whose links live on the items themselves: adding, removing and moving an
 * item allocate nothing, so long-lived collections of short-lived items (held leases, waiters)
 * cost no per-operation garbage and O(1) whatever their size. An item is in at most one list.
 *
 * Lists are kept sorted by a caller-given number (a due time) with {@link insertSorted}, which
 * walks back from the tail: items arrive almost in order, so that is O(1) in practice.
 */
export abstract class ChainList<T extends Chained<T>> {
  head: T | undefined;
  tail: T | undefined;
  size = 0;

  /** True when `item` is in this list (how a list knows is its own: see {@link IntrusiveList}). */
  protected abstract holds(item: T): boolean;

  /** Records that `item` entered (`true`) or left this list. */
  protected abstract mark(item: T, entered: boolean): void;

  /** Appends `item` (which must not be in a list). */
  push(item: T): void {
    this.mark(item, true);
    item.prev = this.tail;
    item.next = undefined;
    if (this.tail === undefined) this.head = item;
    else this.tail.next = item;
    this.tail = item;
    this.size += 1;
  }

  /**
   * Inserts `item` after the last item whose `key(…)` is at most `key(item)`, so that the list
   * stays sorted by `key` (stable: equal keys keep their arrival order).
   */
  insertSorted(item: T, key: (item: T) => number): void {
    const value = key(item);
    let after = this.tail;
    while (after !== undefined && key(after) > value) after = after.prev;
    if (after === this.tail) {
      this.push(item);
      return;
    }
    this.mark(item, true);
    item.prev = after;
    item.next = after === undefined ? this.head : after.next;
    if (item.next !== undefined) item.next.prev = item;
    if (after === undefined) this.head = item;
    else after.next = item;
    this.size += 1;
  }

  /** Removes `item` if it is in this list; returns whether it was. */
  remove(item: T): boolean {
    if (!this.holds(item)) return false;
    if (item.prev === undefined) this.head = item.next;
    else item.prev.next = item.next;
    if (item.next === undefined) this.tail = item.prev;
    else item.next.prev = item.prev;
    item.prev = undefined;
    item.next = undefined;
    this.mark(item, false);
    this.size -= 1;
    return true;
  }

  /** Removes and returns the first item. */
  shift(): T | undefined {
    const first = this.head;
    if (first !== undefined) this.remove(first);
    return first;
  }
}

/** A {@link ChainList} whose items say which list they are in (their `list`). */
export class IntrusiveList<T extends Linked<T>> extends ChainList<T> {
  protected holds(item: T): boolean {
    return item.list === this;
  }

  protected mark(item: T, entered: boolean): void {
    item.list = entered ? this : undefined;
  }
}
