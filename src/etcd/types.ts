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
  key: Buffer;
  create_revision: string;
  mod_revision: string;
  value: Buffer;
  lease: string;
}

/** A range request (`IRangeRequest`), as far as the lockers use it. */
export interface EtcdRangeRequest {
  key?: Buffer;
  range_end?: Buffer;
  sort_order?: "None" | "Ascend" | "Descend";
  sort_target?: "Key" | "Version" | "Create" | "Mod" | "Value";
}

/** The answer of a range request. */
export interface EtcdRangeResponse {
  header: { revision: string };
  kvs: EtcdKeyValue[];
}

/** One comparison of a transaction (`ICompare`); with `range_end`, every key of the range. */
export interface EtcdCompare {
  key?: Buffer;
  range_end?: Buffer;
  target?: "Version" | "Create" | "Mod" | "Value" | "Lease";
  result?: "Equal" | "Greater" | "Less" | "NotEqual";
  version?: string | number;
  mod_revision?: string | number;
  value?: Buffer;
}

/** One operation of a transaction (`IRequestOp`). */
export interface EtcdRequestOp {
  request_range?: EtcdRangeRequest;
  request_put?: { key?: Buffer; value?: Buffer; lease?: string | number };
  request_delete_range?: { key?: Buffer; range_end?: Buffer };
}

/** A transaction (`ITxnRequest`). */
export interface EtcdTxnRequest {
  compare?: EtcdCompare[];
  success?: EtcdRequestOp[];
  failure?: EtcdRequestOp[];
}

/** The answer of a transaction: which branch ran, and its operations' answers in order. */
export interface EtcdTxnResponse {
  header: { revision: string };
  succeeded: boolean;
  responses: Array<{ response_range?: EtcdRangeResponse | null }>;
}

/** A lease of `etcd3` made with `autoKeepAlive: false`: granted once, kept alive by the locker. */
export interface EtcdLease {
  /** Its id once granted (rejects when it could not be). */
  grant(): Promise<string>;
  /** One keepalive: the TTL left after it, in seconds (`"0"`: the lease is gone). */
  keepaliveOnce(options?: EtcdCallOptions): Promise<{ TTL: string }>;
  /** Revokes it (every key attached to it is deleted). */
  revoke(options?: EtcdCallOptions): Promise<void>;
  /** Stops what `etcd3` does for it locally (nothing is sent). */
  release(): void;
  /** `etcd3` reports the lease lost (a keepalive answered TTL 0, or its grant failed). */
  on(event: "lost", handler: (error: Error) => void): unknown;
}

/** A watch on etcd keys (`etcd3`'s `Watcher`). */
export interface EtcdWatcher {
  on(event: "connected", handler: (response: unknown) => void): unknown;
  on(event: "disconnected", handler: (error: Error) => void): unknown;
  on(event: "delete", handler: (kv: EtcdKeyValue) => void): unknown;
  on(event: "error", handler: (error: Error) => void): unknown;
  /** Stops the watch. */
  cancel(): Promise<void>;
}

/** `etcd3`'s `WatchBuilder`, as far as the lockers use it. */
export interface EtcdWatchBuilder {
  prefix(value: string | Buffer): EtcdWatchBuilder;
  /** Only these kinds of events (etcd3 maps `"delete"` to etcd's NOPUT filter). */
  only(...operations: Array<"put" | "delete">): EtcdWatchBuilder;
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
    range(request: EtcdRangeRequest, options?: EtcdCallOptions): Promise<EtcdRangeResponse>;
    txn(request: EtcdTxnRequest, options?: EtcdCallOptions): Promise<EtcdTxnResponse>;
  };
  /** The raw lease service (`inspect` reads other holders' time left). */
  readonly leaseClient: {
    leaseTimeToLive(request: { ID?: string }, options?: EtcdCallOptions): Promise<{ TTL: string }>;
  };
  /** A lease of `ttl` seconds (the lockers pass `autoKeepAlive: false`). */
  lease(ttl: number, options?: { autoKeepAlive?: boolean }): EtcdLease;
  /** Starts describing a watch. */
  watch(): EtcdWatchBuilder;
}
