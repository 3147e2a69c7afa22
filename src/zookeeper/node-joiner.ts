import { performance } from "node:perf_hooks";
import { newToken } from "../internal/token.js";
import { about, unavailable, type ZooKeeperCalls } from "./calls.js";
import { entryPrefix } from "./layout.js";
import type { NodeJanitor } from "./node-janitor.js";
import type { OwnNode } from "./queued-nodes.js";
import { CreateMode, codeOf, ErrorCode } from "./types.js";

const NOTHING = Buffer.alloc(0);
/** Tries of a join whose key node (or prefix node) was deleted under it. */
const JOIN_ROUNDS = 5;

/** What a {@link NodeJoiner} needs. */
export interface NodeJoinerSettings {
  readonly calls: ZooKeeperCalls;
  /** Deletes the nodes a join cut short leaves; knows which key nodes are there. */
  readonly janitor: NodeJanitor;
  /** The locker's prefix node (made, with its parents, before the first join). */
  readonly prefix: string;
  /** The data of each node: the locker's owner. */
  readonly owner: Buffer;
}

/** A node a join made, and the key's children read right after it (see {@link NodeJoiner.join}). */
export interface Joined {
  readonly node: OwnNode;
  /** The node's name among the key's children. */
  readonly name: string;
  readonly children: string[];
  /** `performance.now()` when the create was sent. */
  readonly sentAt: number;
}

/** How a ZooKeeper attempt joins a key's queue: its ephemeral sequential node behind everybody. */
export class NodeJoiner {
  readonly #settings: NodeJoinerSettings;
  #prefixMade: Promise<unknown> | undefined;

  constructor(settings: NodeJoinerSettings) {
    this.#settings = settings;
  }

  /**
   * Creates this attempt's node behind everybody and reads the key's children after it, pipelined:
   * ZooKeeper runs a session's requests in order. The key's node is created first, in the same
   * round trip, unless this locker knows it is there (see `KeyNodes`); one deleted meanwhile (by
   * another process, once it was empty) fails the create with NO_NODE, and the join makes it and
   * tries again. A join that fails leaves the key (its node goes once idle).
   */
  async join(resource: string, weight: number): Promise<Joined> {
    try {
      return await this.#join(resource, weight);
    } catch (error) {
      this.#settings.janitor.dropKeyNode(resource);
      throw error;
    }
  }

  async #join(resource: string, weight: number): Promise<Joined> {
    const { calls, janitor, owner } = this.#settings;
    const { keyNodes } = janitor;
    await this.#makePrefix(resource, false);
    const slot = newToken();
    for (let round = 1; ; round++) {
      const sentAt = performance.now();
      const makingKey = keyNodes.use(resource)
        ? undefined
        : calls.bound(calls.sendCreate(resource, NOTHING, CreateMode.PERSISTENT)).catch(codeOf);
      const making = calls.sendCreate(
        `${resource}/${entryPrefix(slot, weight)}`,
        owner,
        CreateMode.EPHEMERAL_SEQUENTIAL,
      );
      const reading = calls.children(resource);
      reading.catch(ignore);
      let path: string;
      try {
        path = await calls.bound(making);
      } catch (error) {
        if (codeOf(error) !== ErrorCode.NO_NODE) {
          // Cut short: the node may come later (the client sends it once connected), or may have
          // been made before the connection dropped; it goes either way.
          janitor.afterLateAnswer(making, resource, slot);
          throw unavailable(resource, error);
        }
        // The key's node is gone: made again in the next round (and the prefix node, should the
        // key's create have found that gone too, as when it is deleted by hand).
        keyNodes.lost(resource);
        if (round === JOIN_ROUNDS) throw unavailable(resource, error);
        if ((await makingKey) === ErrorCode.NO_NODE) await this.#makePrefix(resource, true);
        continue;
      }
      keyNodes.found(resource);
      const node: OwnNode = { resource, path, validUntil: 0 };
      try {
        return { node, name: path.slice(resource.length + 1), children: await reading, sentAt };
      } catch (error) {
        janitor.removeLater(path, resource);
        throw unavailable(resource, error);
      }
    }
  }

  /** Makes the prefix node (and its parents) once, or `again` when it was found gone. */
  #makePrefix(resource: string, again: boolean): Promise<unknown> {
    if (again || this.#prefixMade === undefined) {
      const making = this.#settings.calls.makePath(this.#settings.prefix);
      this.#prefixMade = making;
      making.catch(() => {
        if (this.#prefixMade === making) this.#prefixMade = undefined;
      });
    }
    return about(resource, this.#prefixMade as Promise<unknown>);
  }
}

function ignore(): void {}
