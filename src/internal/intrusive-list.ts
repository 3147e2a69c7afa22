/** The links an item carries to sit in one {@link IntrusiveList} at a time. */
export interface Linked<T extends Linked<T>> {
  prev: T | undefined;
  next: T | undefined;
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
export class IntrusiveList<T extends Linked<T>> {
  head: T | undefined;
  tail: T | undefined;
  size = 0;

  /** Appends `item` (which must not be in a list). */
  push(item: T): void {
    item.list = this;
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
    item.list = this;
    item.prev = after;
    item.next = after === undefined ? this.head : after.next;
    if (item.next !== undefined) item.next.prev = item;
    if (after === undefined) this.head = item;
    else after.next = item;
    this.size += 1;
  }

  /** Removes `item` if it is in this list; returns whether it was. */
  remove(item: T): boolean {
    if (item.list !== this) return false;
    if (item.prev === undefined) this.head = item.next;
    else item.prev.next = item.next;
    if (item.next === undefined) this.tail = item.prev;
    else item.next.prev = item.prev;
    item.prev = undefined;
    item.next = undefined;
    item.list = undefined;
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
