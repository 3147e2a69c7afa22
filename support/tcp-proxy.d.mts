/** Types of tcp-proxy.mjs (hand-written: TypeScript does not read the .mjs file). */

/** A direction of traffic: "upstream" is client to target, "downstream" target to client. */
export type Direction = "upstream" | "downstream";

/** How a proxy is started. */
export interface TcpProxyOptions {
  /** Initial one-way latency of both directions (ms, default 0). */
  readonly latencyMs?: number;
}

/**
 * A TCP proxy from a free 127.0.0.1 port to a 127.0.0.1 target port, with runtime latency,
 * black-holing (a partition: connections accepted and held, nothing forwarded, nothing closed) and
 * cutting of every connection.
 */
export declare class TcpProxy {
  private constructor();
  /** Starts a proxy on a free 127.0.0.1 port forwarding to 127.0.0.1:`targetPort`. */
  static start(targetPort: number, options?: TcpProxyOptions): Promise<TcpProxy>;
  /** The port the proxy listens on (127.0.0.1). */
  readonly port: number;
  /** The port it forwards to (127.0.0.1). */
  readonly targetPort: number;
  /** "127.0.0.1". */
  readonly host: "127.0.0.1";
  /** The current one-way latency of each direction (ms). */
  readonly latency: { readonly upstream: number; readonly downstream: number };
  /** One-way latency of `direction` (ms). */
  latencyOf(direction: Direction): number;
  /**
   * Sets the added one-way latency in ms (a 600 ms round trip is `setLatency(300)`) for both
   * directions (default) or one. Applies to chunks arriving from now on; chunks keep their order.
   */
  setLatency(ms: number, direction?: Direction | "both"): void;
  /** Whether traffic is black-holed. */
  readonly blackholed: boolean;
  /** Whether arriving bytes are discarded (a black hole with `drop: true`). */
  readonly dropping: boolean;
  /**
   * Starts (true) or ends (false) a partition: connections are accepted and held (a new one reaches
   * the target only when it ends), nothing is forwarded, nothing is closed (no RST, no FIN). Held
   * bytes are delivered in order when it ends, as TCP retransmission would; with `drop: true` bytes
   * arriving meanwhile are discarded instead (the stream is then broken: cut it afterwards).
   */
  blackhole(on: boolean, options?: { readonly drop?: boolean }): void;
  /** Number of open proxied connections. */
  readonly connectionCount: number;
  /** Destroys every proxied connection (both sides); the proxy keeps accepting new ones. */
  cutAll(): void;
  /** Stops listening and destroys every connection. Idempotent. */
  close(): Promise<void>;
}

/** Starts a proxy on a free 127.0.0.1 port forwarding to 127.0.0.1:`targetPort`. */
export declare function startTcpProxy(targetPort: number, options?: TcpProxyOptions): Promise<TcpProxy>;
