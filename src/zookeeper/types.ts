/**
 * The parts of a `node-zookeeper-client` Client the ZooKeeper lockers use, written out
 * structurally so that the package's declarations import nothing from `node-zookeeper-client` (a
 * `Client` fits them), and constants of its protocol, so that loading this package does not load
 * it.
 */

/** A node's metadata, as ZooKeeper answers it (`Stat`), as far as the lockers read it. */
export interface ZooKeeperStat {
  /** The zxid of the transaction that created the node (8 bytes, big-endian): a lock's fencing token. */
  readonly czxid: Buffer;
}

/** A ZooKeeper event a watch delivers (`Event`). */
export interface ZooKeeperEvent {
  /** Its type (2: the node was deleted). */
  getType(): number;
  /** The path of the node it is about. */
  getPath(): string;
}

/** A session state, as the client reports it (`State`). */
export interface ZooKeeperState {
  /** Its name: `"EXPIRED"`, `"DISCONNECTED"`, `"SYNC_CONNECTED"`… */
  readonly name: string;
}

/** `node-zookeeper-client`'s `Exception`, as far as the lockers read it. */
export interface ZooKeeperException {
  /** ZooKeeper's error code (`NO_NODE` is -101, `NODE_EXISTS` -110…). */
  getCode(): number;
}

/** What a callback receives as its error: null, or `node-zookeeper-client`'s `Exception` (or an Error). */
export type ZooKeeperCallbackError = ZooKeeperException | Error | null;

/**
 * A ZooKeeper client: a `Client` from `node-zookeeper-client` (`createClient(…)` then `connect()`)
 * that the caller creates, owns and closes. Its session is the lockers' lease: the nodes they make
 * live as long as it does.
 */
export interface ZooKeeperClient {
  /** Creates a node (`mode`: 0 persistent, 3 ephemeral sequential…) and answers its path (with the sequence, for a sequential node). */
  create(
    path: string,
    data: Buffer,
    mode: number,
    callback: (error: ZooKeeperCallbackError, path: string) => void,
  ): void;
  /** Deletes a node (any version). */
  remove(path: string, callback: (error: ZooKeeperCallbackError) => void): void;
  /** A node's metadata (null when there is none), leaving `watcher` on it (or on its creation). */
  exists(
    path: string,
    watcher: (event: ZooKeeperEvent) => void,
    callback: (error: ZooKeeperCallbackError, stat: ZooKeeperStat | null) => void,
  ): void;
  /** A node's metadata (null when there is none). */
  exists(path: string, callback: (error: ZooKeeperCallbackError, stat: ZooKeeperStat | null) => void): void;
  /** A node's children's names. */
  getChildren(path: string, callback: (error: ZooKeeperCallbackError, children: string[]) => void): void;
  /** A node's data and metadata. */
  getData(path: string, callback: (error: ZooKeeperCallbackError, data: Buffer, stat: ZooKeeperStat) => void): void;
  /** The negotiated session timeout, in ms (the requested one until the first connection). */
  getSessionTimeout(): number;
  /** The session's state changes (`"state"`): `EXPIRED` (every node of the session is gone), `DISCONNECTED`, `SYNC_CONNECTED`… */
  on(event: "state", listener: (state: ZooKeeperState) => void): unknown;
  /** Removes a listener added with `on`. */
  removeListener(event: "state", listener: (state: ZooKeeperState) => void): unknown;
}

/** Node creation modes (`CreateMode`). */
export const CreateMode = { PERSISTENT: 0, EPHEMERAL_SEQUENTIAL: 3 } as const;

/** ZooKeeper's error codes the lockers tell apart (`Exception`). */
export const ErrorCode = {
  CONNECTION_LOSS: -4,
  NO_NODE: -101,
  NODE_EXISTS: -110,
  NOT_EMPTY: -111,
  SESSION_EXPIRED: -112,
} as const;

/** The type of the event of a deleted node (`Event.NODE_DELETED`). */
export const NODE_DELETED = 2;

/** The ZooKeeper error code of `error`, if it is one of ZooKeeper's. */
export function codeOf(error: unknown): number | undefined {
  const getCode = (error as { getCode?: unknown } | null | undefined)?.getCode;
  return typeof getCode === "function" ? (getCode.call(error) as number) : undefined;
}
