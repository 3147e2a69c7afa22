/**
 * The parts of `etcd3` the etcd lockers use, written out structurally so that the package's
 * declarations import nothing from `etcd3` (an `Etcd3` client fits them). Requests and answers
 * are etcd's gRPC messages as `etcd3` passes them: keys and values as Buffers, revisions and lease
 * ids as decimal strings.
 */

/** gRPC call options (`etcd3` passes them to `@grpc/grpc-js`): only the deadline is used. */
export interface EtcdCallOptions {
  /** When the call is abandoned (wall clock: gRPC's own deadline). */
  deadline?: Date | number;
}

/** One key as etcd stores it (`IKeyValue`). */
export interface EtcdKeyValue {
  /** The key. */
  key: Buffer;
  /** The revision that created it (a lock's fencing token). */
  create_revision: string;
  /** The revision that last changed it. */
  mod_revision: string;
  /** Its value. */
  value: Buffer;
  /** The lease it is attached to (`"0"`: none). */
  lease: string;
}

/** A range request (`IRangeRequest`), as far as the lockers use it. */
export interface EtcdRangeRequest {
  /** The first key. */
  key?: Buffer;
  /** The end of the range (exclusive). */
  range_end?: Buffer;
  /** The order of the answer. */
  sort_order?: "None" | "Ascend" | "Descend";
  /** What the answer is sorted by. */
  sort_target?: "Key" | "Version" | "Create" | "Mod" | "Value";
  /** The most keys answered (0 or absent: no limit). */
  limit?: number;
  /** Answer the keys without their values. */
  keys_only?: boolean;
}

/** The answer of a range request. */
export interface EtcdRangeResponse {
  /** The store's revision when it answered. */
  header: {
    /** The revision. */
    revision: string;
  };
  /** The keys found. */
  kvs: EtcdKeyValue[];
}

/** One comparison of a transaction (`ICompare`); with `range_end`, every key of the range. */
export interface EtcdCompare {
  /** The key compared. */
  key?: Buffer;
  /** The end of the range compared (exclusive). */
  range_end?: Buffer;
  /** What is compared. */
  target?: "Version" | "Create" | "Mod" | "Value" | "Lease";
  /** How it must compare. */
  result?: "Equal" | "Greater" | "Less" | "NotEqual";
  /** The version compared with (`target: "Version"`). */
  version?: string | number;
  /** The revision compared with (`target: "Mod"`). */
  mod_revision?: string | number;
  /** The value compared with (`target: "Value"`). */
  value?: Buffer;
}

/** One operation of a transaction (`IRequestOp`). */
export interface EtcdRequestOp {
  /** A read. */
  request_range?: EtcdRangeRequest;
  /** A write. */
  request_put?: {
    /** The key written. */
    key?: Buffer;
    /** Its value. */
    value?: Buffer;
    /** The lease it is attached to. */
    lease?: string | number;
  };
  /** A delete. */
  request_delete_range?: {
    /** The first key deleted. */
    key?: Buffer;
    /** The end of the range deleted (exclusive). */
    range_end?: Buffer;
  };
}

/** A transaction (`ITxnRequest`). */
export interface EtcdTxnRequest {
  /** The conditions, all of which must hold. */
  compare?: EtcdCompare[];
  /** The operations run when they do. */
  success?: EtcdRequestOp[];
  /** The operations run when they do not. */
  failure?: EtcdRequestOp[];
}

/** The answer of a transaction: which branch ran, and its operations' answers in order. */
export interface EtcdTxnResponse {
  /** The store's revision after it ran. */
  header: {
    /** The revision. */
    revision: string;
  };
  /** Whether the `success` branch ran. */
  succeeded: boolean;
  /** The answers of the branch's operations, in order. */
  responses: Array<{
    /** A read's answer. */
    response_range?: EtcdRangeResponse | null;
  }>;
}

/** A lease of `etcd3` made with `autoKeepAlive: false`: granted once, kept alive by the locker. */
export interface EtcdLease {
  /** Its id once granted (rejects when it could not be). */
  grant(): Promise<string>;
  /** One keepalive: the TTL left after it, in seconds (`"0"`: the lease is gone). */
  keepaliveOnce(options?: EtcdCallOptions): Promise<{
    /** Seconds left. */
    TTL: string;
  }>;
  /** Revokes it (every key attached to it is deleted). */
  revoke(options?: EtcdCallOptions): Promise<void>;
  /** Stops what `etcd3` does for it locally (nothing is sent). */
  release(): void;
  /** `etcd3` reports the lease lost (a keepalive answered TTL 0, or its grant failed). */
  on(event: "lost", handler: (error: Error) => void): unknown;
}

/** A watch on etcd keys (`etcd3`'s `Watcher`). */
export interface EtcdWatcher {
  /** The watch is established. */
  on(event: "connected", handler: (response: unknown) => void): unknown;
  /** The watch's stream was cut (it reconnects). */
  on(event: "disconnected", handler: (error: Error) => void): unknown;
  /** A watched key was deleted. */
  on(event: "delete", handler: (kv: EtcdKeyValue) => void): unknown;
  /** The watch failed. */
  on(event: "error", handler: (error: Error) => void): unknown;
  /** Stops the watch. */
  cancel(): Promise<void>;
}

/** `etcd3`'s `WatchBuilder`, as far as the lockers use it. */
export interface EtcdWatchBuilder {
  /** Watches every key that starts with `value`. */
  prefix(value: string | Buffer): EtcdWatchBuilder;
  /** Only these kinds of events (etcd3 maps `"delete"` to etcd's NOPUT filter). */
  only(...operations: Array<"put" | "delete">): EtcdWatchBuilder;
  /** Starts at this revision (etcd replays every event since, unless it was compacted away). */
  startRevision(revision: string): EtcdWatchBuilder;
  /** The watcher, not yet connected (its "connected" event says when it is). */
  watcher(): EtcdWatcher;
}

/**
 * An etcd client: an `Etcd3` from the `etcd3` package that the caller creates, owns and closes.
 * A namespaced client (`client.namespace("app/")`) works too: its prefix is put before every key.
 */
export interface EtcdClient {
  /** The client's namespace (empty for an `Etcd3`). */
  readonly prefix: Buffer;
  /** The raw key-value service. */
  readonly kv: {
    /** Reads keys. */
    range(request: EtcdRangeRequest, options?: EtcdCallOptions): Promise<EtcdRangeResponse>;
    /** Runs a transaction. */
    txn(request: EtcdTxnRequest, options?: EtcdCallOptions): Promise<EtcdTxnResponse>;
  };
  /** The raw lease service (`inspect` reads other holders' time left). */
  readonly leaseClient: {
    /** The time left on lease `ID`. */
    leaseTimeToLive(
      request: {
        /** The lease id. */
        ID?: string;
      },
      options?: EtcdCallOptions,
    ): Promise<{
      /** Seconds left (`"-1"`: gone). */
      TTL: string;
    }>;
  };
  /** A lease of `ttl` seconds (the lockers pass `autoKeepAlive: false`). */
  lease(ttl: number, options?: { autoKeepAlive?: boolean }): EtcdLease;
  /** Starts describing a watch. */
  watch(): EtcdWatchBuilder;
}
