import { StoreUnavailableError } from "../errors.js";
import { DeadlineGroup } from "../internal/deadline-group.js";
import {
  CreateMode,
  codeOf,
  ErrorCode,
  type ZooKeeperCallbackError,
  type ZooKeeperClient,
  type ZooKeeperEvent,
  type ZooKeeperStat,
} from "./types.js";

/**
 * A ZooKeeper client's calls as promises, each bounded by the operation timeout of the session's
 * silence (one session answers in order: see `DeadlineGroup`). A call cut short by its bound is
 * not withdrawn: the client sends it once connected, and its answer comes later. The `send…`
 * methods give that late answer; the others bound it.
 */
export class ZooKeeperCalls {
  readonly client: ZooKeeperClient;
  readonly #timeoutMs: number;
  readonly #deadlines: DeadlineGroup;

  constructor(client: ZooKeeperClient, timeoutMs: number) {
    this.client = client;
    this.#timeoutMs = timeoutMs;
    this.#deadlines = new DeadlineGroup(timeoutMs, { inOrder: true });
  }

  /** Settles like `call`, or rejects once the operation timeout of ZooKeeper's silence has passed. */
  bound<T>(call: Promise<T>): Promise<T> {
    return this.#deadlines.run(call, () => new Error(`ZooKeeper did not answer within ${this.#timeoutMs} ms`));
  }

  /** Creates a node (unbounded): its path. */
  sendCreate(path: string, data: Buffer, mode: (typeof CreateMode)[keyof typeof CreateMode]): Promise<string> {
    return promised<string>((done) => this.client.create(path, data, mode, done));
  }

  /** Deletes a node (unbounded). */
  sendRemove(path: string): Promise<void> {
    return promised<void>((done) => this.client.remove(path, done));
  }

  /** Creates `path` and its parents, pipelined (the ones there already are fine). */
  makePath(path: string): Promise<unknown> {
    const parts = path.split("/").slice(1);
    const making = parts.map((_part, index) => {
      const each = `/${parts.slice(0, index + 1).join("/")}`;
      return this.bound(this.sendCreate(each, Buffer.alloc(0), CreateMode.PERSISTENT)).catch((error: unknown) => {
        if (codeOf(error) !== ErrorCode.NODE_EXISTS) throw error;
      });
    });
    return Promise.all(making);
  }

  /** A node's metadata, or null when there is none; `watcher` hears its delete (or creation). */
  exists(path: string, watcher?: (event: ZooKeeperEvent) => void): Promise<ZooKeeperStat | null> {
    return this.bound(
      promised<ZooKeeperStat | null>((done) =>
        watcher === undefined ? this.client.exists(path, done) : this.client.exists(path, watcher, done),
      ),
    );
  }

  /** A node's children's names; none when the node is missing. */
  children(path: string): Promise<string[]> {
    return this.bound(promised<string[]>((done) => this.client.getChildren(path, done))).catch((error: unknown) => {
      if (codeOf(error) === ErrorCode.NO_NODE) return [];
      throw error;
    });
  }

  /** A node's data and metadata, or undefined when the node is missing. */
  data(path: string): Promise<[Buffer, ZooKeeperStat] | undefined> {
    return this.bound(
      promised<[Buffer, ZooKeeperStat]>((done) =>
        this.client.getData(path, (error, data, stat) => done(error, [data, stat])),
      ),
    ).catch((error: unknown) => {
      if (codeOf(error) === ErrorCode.NO_NODE) return undefined;
      throw error;
    });
  }
}

/** A call of the client's callback style as a promise (an error that is not null rejects it). */
function promised<T>(call: (done: (error: ZooKeeperCallbackError, value: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    call((error, value) => (error === null || error === undefined ? resolve(value) : reject(error)));
  });
}

/** The fencing token in `stat`: the node's creation zxid (epoch and counter: it rises across leader changes). */
export function czxidOf(stat: ZooKeeperStat): bigint {
  return stat.czxid.readBigUInt64BE(0);
}

/** The client's ZooKeeper session expired: ZooKeeper deleted its nodes, and the client opens no other. */
export class SessionExpiredError extends Error {
  constructor() {
    super("the client's ZooKeeper session expired (its nodes are gone; a new client and locker are needed)");
    this.name = "SessionExpiredError";
  }
}

/** A failed ZooKeeper call about `resource`: a StoreUnavailableError with the error as its cause. */
export function unavailable(resource: string, error: unknown): StoreUnavailableError {
  if (error instanceof StoreUnavailableError) return error;
  const detail =
    codeOf(error) === ErrorCode.SESSION_EXPIRED
      ? "the client's session expired (its nodes are gone; a new client and locker are needed)"
      : error instanceof Error
        ? error.message
        : String(error);
  return new StoreUnavailableError(resource, `ZooKeeper failed on "${resource}": ${detail}`, { cause: error });
}

/** Settles like `call`; a ZooKeeper failure is {@link unavailable} about `resource`. */
export async function about<T>(resource: string, call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (error) {
    throw unavailable(resource, error);
  }
}
