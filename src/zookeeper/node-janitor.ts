import { InFlight } from "../internal/in-flight.js";
import { pause } from "../internal/sleep.js";
import type { ZooKeeperCalls } from "./calls.js";
import { KeyNodes } from "./key-nodes.js";
import { codeOf, ErrorCode } from "./types.js";

/**
 * What a ZooKeeper locker deletes, and makes sure of: a node of its own (a holder's, a waiter's, one
 * an attempt left), and the key's node once idle (see {@link KeyNodes}: kept while the key is in
 * use here, so that a join needs no create of it; a busy key's node refuses its delete: fine), so
 * that nothing stays behind but the prefix node. A delete ZooKeeper did not confirm is sent again
 * with a growing delay (50 ms to 1 s) until it is, or until the locker closes (the node then lives
 * as long as the session). {@link drain} waits for everything under way.
 */
export class NodeJanitor {
  /** The key nodes this locker knows are there, and when each idle one goes. */
  readonly keyNodes: KeyNodes;
  readonly #calls: ZooKeeperCalls;
  readonly #underWay = new InFlight();
  #closing = false;

  constructor(calls: ZooKeeperCalls) {
    this.#calls = calls;
    this.keyNodes = new KeyNodes(calls, (operation) => this.track(operation));
  }

  /**
   * Deletes the node at `path`, then `keyNode` once idle (see {@link dropKeyNode}); resolves once
   * the first delete was answered (or handed to the retries).
   */
  async remove(path: string, keyNode: string): Promise<void> {
    const removing = this.#calls.bound(this.#calls.sendRemove(path));
    this.dropKeyNode(keyNode);
    await removing.catch((error: unknown) => {
      if (codeOf(error) !== ErrorCode.NO_NODE) this.#removeSurelyThenDrop(path, keyNode);
    });
  }

  /** {@link remove}, in the background. */
  removeLater(path: string, keyNode: string): void {
    this.track(this.remove(path, keyNode));
  }

  /**
   * This locker left the key of `keyNode`: its node is deleted, if empty, once nothing here used it
   * for a while (at once after close). See {@link KeyNodes}.
   */
  dropKeyNode(keyNode: string): void {
    this.keyNodes.leave(keyNode);
  }

  /** Deletes `path`, trying again with a growing delay until ZooKeeper answers or the locker closes. */
  async removeSurely(path: string): Promise<void> {
    for (let delay = 50; ; delay = Math.min(2 * delay, 1000)) {
      try {
        await this.#calls.bound(this.#calls.sendRemove(path));
        return;
      } catch (error) {
        const code = codeOf(error);
        if (code === ErrorCode.NO_NODE || code === ErrorCode.SESSION_EXPIRED || this.#closing) return;
      }
      await pause(delay);
    }
  }

  /**
   * Deletes the nodes of slot `slot` under `keyNode`: an attempt whose connection dropped before it
   * heard back may have made its node, whose name only the slot tells.
   */
  async sweep(keyNode: string, slot: string): Promise<void> {
    const children = await this.#calls.children(keyNode);
    await Promise.all(
      children.filter((name) => name.startsWith(slot)).map((name) => this.removeSurely(`${keyNode}/${name}`)),
    );
  }

  /** Keeps `operation` (bounded: every call in it is) under way until it settles (its failure is ignored). */
  track(operation: Promise<unknown>): void {
    this.#underWay.track(operation);
  }

  /**
   * Deletes what an attempt cut short leaves, once its call `sent` (unbounded: the client sends it
   * when it connects again, maybe never) answers: the node it made, or — when the connection
   * dropped before the answer, so that it may have made one — the nodes of its slot under
   * `keyNode`. Not under way for {@link drain}: a locker closing while ZooKeeper is silent does not
   * wait for it.
   */
  afterLateAnswer(sent: Promise<string>, keyNode: string, slot: string): void {
    sent.then(
      (made) => this.#removeSurelyThenDrop(made, keyNode),
      (error: unknown) => {
        if (codeOf(error) === ErrorCode.CONNECTION_LOSS) {
          this.track(this.sweep(keyNode, slot).finally(() => this.dropKeyNode(keyNode)));
        }
      },
    );
  }

  /**
   * Stops retrying (each delete under way ends at its next failure), deletes the key nodes known
   * here (those still in use refuse) and waits for everything under way.
   */
  async drain(): Promise<void> {
    this.#closing = true;
    this.keyNodes.close();
    await this.#underWay.drained();
  }

  /** {@link removeSurely} in the background, then the key's node once idle: the node was in it. */
  #removeSurelyThenDrop(path: string, keyNode: string): void {
    this.track(this.removeSurely(path).finally(() => this.dropKeyNode(keyNode)));
  }
}
