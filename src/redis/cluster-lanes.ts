import { withTimeout } from "../internal/sleep.js";
import type { ClusterNodes, Command } from "./client/redis-connection.js";
import { hashTagOf } from "./keys.js";
import { type LaneRouter, type LaneTransaction, TransactionLane } from "./transaction-lane.js";

/** Slots of a Redis Cluster. */
const SLOTS = 16384;

/** How many MOVED redirections one operation follows before it fails (a Cluster resharding). */
const MAX_HOPS = 3;

/** CRC16-CCITT (XMODEM), the Cluster's key hash, one byte at a time. */
function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

const encoder = new TextEncoder();

/** The Cluster slot of `key`: the CRC16 of its hash tag (or of the whole key) modulo 16384. */
export function clusterSlot(key: string): number {
  return crc16(encoder.encode(hashTagOf(key) ?? key)) % SLOTS;
}

/** The slot and address a `MOVED <slot> <host:port>` error names, or undefined for any other error. */
function movedTo(error: unknown): { slot: number; address: string } | undefined {
  if (!(error instanceof Error)) return undefined;
  const match = /^MOVED (\d+) (\S+)/.exec(error.message);
  return match === null ? undefined : { slot: Number(match[1]), address: match[2] as string };
}

/**
 * The lanes of a locker without scripts on a Cluster: one connection (a {@link TransactionLane})
 * per master, each a duplicate of the Cluster client's own connection to that node, so that a
 * transaction's WATCH, reads, MULTI and EXEC all reach the master of its keys' slot and nothing
 * else comes between them. A key goes where the client's slot table says; a `MOVED` answer (the
 * slot moved) is remembered and followed, at most {@link MAX_HOPS} times. Only a WATCH, a read or
 * a SET NX can answer MOVED, and each then wrote nothing, so following it never runs a write
 * twice; a write queued on a node that lost the slot since the WATCH makes its EXEC fail
 * (EXECABORT) instead, and the operation fails as a transient error, its next try going where the
 * slot is now.
 */
export class ClusterLanes implements LaneRouter {
  readonly #nodes: ClusterNodes;
  readonly #timeoutMs: number;
  readonly #lanes = new Map<string, TransactionLane>();
  /** Slots whose master a MOVED named (the client's table may lag behind). */
  readonly #moved = new Map<number, string>();

  constructor(nodes: ClusterNodes, timeoutMs: number) {
    this.#nodes = nodes;
    this.#timeoutMs = timeoutMs;
  }

  transaction<T>(resource: string, body: (transaction: LaneTransaction) => Promise<T>): Promise<T> {
    return this.#routed(resource, (lane) => lane.transaction(body));
  }

  send(resource: string, command: Command, now?: number): Promise<unknown> {
    return this.#routed(resource, (lane) => lane.send(command, now));
  }

  close(): void {
    for (const lane of this.#lanes.values()) lane.close();
  }

  async #routed<T>(resource: string, run: (lane: TransactionLane) => Promise<T>): Promise<T> {
    const ready = this.#nodes.ready();
    if (ready !== undefined) {
      await withTimeout(
        ready,
        this.#timeoutMs,
        () => new Error(`the Cluster was not ready within ${this.#timeoutMs} ms`),
      );
    }
    const slot = clusterSlot(resource);
    for (let hops = 0; ; hops++) {
      const address = this.#moved.get(slot) ?? this.#nodes.masterOf(slot);
      if (address === undefined) throw new Error(`the Cluster client knows no master for slot ${slot}`);
      try {
        return await run(this.#lane(address));
      } catch (error) {
        const moved = movedTo(error);
        if (moved === undefined || hops >= MAX_HOPS) throw error;
        this.#moved.set(moved.slot, moved.address);
      }
    }
  }

  #lane(address: string): TransactionLane {
    let lane = this.#lanes.get(address);
    if (lane === undefined) {
      lane = new TransactionLane(
        () => this.#nodes.openTransactions(address),
        `Cluster node ${address}`,
        this.#timeoutMs,
      );
      this.#lanes.set(address, lane);
    }
    return lane;
  }
}
