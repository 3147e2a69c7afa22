/**
 * A small TCP proxy for fault tests, on 127.0.0.1 only: it listens on a free port and forwards
 * every connection to a target port, and can be told at runtime to
 *
 * - add one-way latency (per direction; a chunk is delivered no earlier than `latency` ms after it
 *   arrived, and chunks keep their order),
 * - black-hole traffic like a network partition: connections are accepted and held, nothing is
 *   forwarded, nothing is closed (no RST, no FIN). By default the bytes are held and delivered
 *   when the partition heals, as TCP retransmission would; with `{ drop: true }` they are
 *   discarded (the byte stream is then broken: only useful before `cutAll()`),
 * - cut every connection (`cutAll()`), and close.
 *
 * Plain JavaScript (runnable by `node`), typed for TypeScript by tcp-proxy.d.mts.
 */

import { createConnection, createServer } from "node:net";
import { performance } from "node:perf_hooks";

const HOST = "127.0.0.1";
/** Marks the end of a direction (a FIN to pass on) in a lane's queue. */
const END = Symbol("end");

/**
 * One direction of one connection: a FIFO of chunks, each delivered once due and once the proxy
 * lets traffic through.
 */
class Lane {
  /** @type {{ item: Buffer | typeof END, due: number }[]} */
  queue = [];
  timer = undefined;
  /** @type {import("node:net").Socket | undefined} */
  target = undefined;

  /**
   * @param {TcpProxy} proxy
   * @param {"upstream" | "downstream"} direction
   */
  constructor(proxy, direction) {
    this.proxy = proxy;
    this.direction = direction;
  }

  push(item) {
    if (this.proxy.dropping) return;
    this.queue.push({ item, due: performance.now() + this.proxy.latencyOf(this.direction) });
    this.pump();
  }

  /** Delivers every due chunk in order, then waits for the next one (unless black-holed). */
  pump() {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    const target = this.target;
    if (target === undefined || target.destroyed || this.proxy.blackholed) return;
    while (this.queue.length > 0) {
      const head = this.queue[0];
      const wait = head.due - performance.now();
      if (wait > 0) {
        // Timers may fire a little early: pump() checks again and waits for the rest.
        this.timer = setTimeout(() => this.pump(), Math.ceil(wait));
        return;
      }
      this.queue.shift();
      if (head.item === END) target.end();
      else target.write(head.item);
    }
  }

  clear() {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.queue = [];
  }
}

/** One proxied connection: the accepted client socket, the upstream socket, and a lane each way. */
class Link {
  /**
   * @param {TcpProxy} proxy
   * @param {import("node:net").Socket} client
   */
  constructor(proxy, client) {
    this.proxy = proxy;
    this.client = client;
    this.upstream = undefined;
    this.up = new Lane(proxy, "upstream");
    this.down = new Lane(proxy, "downstream");
    this.down.target = client;
    client.setNoDelay(true);
    client.on("error", () => undefined);
    client.on("data", (chunk) => this.up.push(chunk));
    client.on("end", () => this.up.push(END));
    client.on("close", (hadError) => this.#closed(hadError));
    if (!proxy.blackholed) this.connectUpstream();
  }

  /** Opens the connection to the target (deferred while black-holed: the target sees nothing). */
  connectUpstream() {
    if (this.upstream !== undefined || this.client.destroyed) return;
    const upstream = createConnection({ host: HOST, port: this.proxy.targetPort, allowHalfOpen: true });
    this.upstream = upstream;
    upstream.setNoDelay(true);
    upstream.on("error", () => undefined);
    upstream.on("data", (chunk) => this.down.push(chunk));
    upstream.on("end", () => this.down.push(END));
    upstream.on("close", (hadError) => this.#closed(hadError));
    upstream.once("connect", () => {
      this.up.target = upstream;
      this.up.pump();
    });
  }

  /** Lets queued traffic through after a partition heals. */
  resume() {
    this.connectUpstream();
    this.up.pump();
    this.down.pump();
  }

  /**
   * A socket closed. After an error (or a refused upstream), the other side is destroyed too;
   * after an orderly close, what is queued for the other side is still delivered.
   */
  #closed(hadError) {
    const bothClosed = this.client.destroyed && (this.upstream === undefined || this.upstream.destroyed);
    if (hadError || bothClosed) this.destroy();
  }

  destroy() {
    this.up.clear();
    this.down.clear();
    this.client.destroy();
    this.upstream?.destroy();
    this.proxy.links.delete(this);
  }
}

/** A TCP proxy from a free 127.0.0.1 port to a 127.0.0.1 target port. */
export class TcpProxy {
  /** @type {Set<Link>} */
  links = new Set();
  #latency = { upstream: 0, downstream: 0 };
  #blackholed = false;
  #dropping = false;
  #server;

  /**
   * Use {@link TcpProxy.start} or {@link startTcpProxy}.
   * @param {import("node:net").Server} server listening
   * @param {number} targetPort
   */
  constructor(server, targetPort) {
    this.#server = server;
    this.targetPort = targetPort;
    const address = server.address();
    if (address === null || typeof address !== "object") throw new Error("the proxy is not listening");
    this.port = address.port;
    server.on("connection", (socket) => {
      this.links.add(new Link(this, socket));
    });
  }

  /**
   * Starts a proxy on a free 127.0.0.1 port forwarding to 127.0.0.1:`targetPort`.
   * @param {number} targetPort
   * @param {{ latencyMs?: number }} [options] initial one-way latency for both directions
   */
  static async start(targetPort, options = {}) {
    if (!Number.isInteger(targetPort) || targetPort <= 0 || targetPort > 65535) {
      throw new RangeError(`invalid target port ${targetPort}`);
    }
    const server = createServer({ allowHalfOpen: true });
    await new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, HOST, () => {
        server.off("error", reject);
        resolve();
      });
    });
    server.on("error", () => undefined);
    const proxy = new TcpProxy(server, targetPort);
    if (options.latencyMs !== undefined) proxy.setLatency(options.latencyMs);
    return proxy;
  }

  /** "127.0.0.1". */
  get host() {
    return HOST;
  }

  /** The current one-way latency of each direction (ms). */
  get latency() {
    return { ...this.#latency };
  }

  /** One-way latency of `direction` (ms). */
  latencyOf(direction) {
    return this.#latency[direction];
  }

  /**
   * Sets the added one-way latency in ms (a 600 ms round trip is `setLatency(300)`) for both
   * directions, or only "upstream" (client to target) or "downstream" (target to client). Applies
   * to chunks that arrive from now on; order is kept (a chunk never overtakes an earlier one).
   * @param {number} ms
   * @param {"both" | "upstream" | "downstream"} [direction]
   */
  setLatency(ms, direction = "both") {
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`invalid latency ${ms}`);
    if (direction === "both" || direction === "upstream") this.#latency.upstream = ms;
    if (direction === "both" || direction === "downstream") this.#latency.downstream = ms;
  }

  /** Whether traffic is black-holed. */
  get blackholed() {
    return this.#blackholed;
  }

  /** Whether arriving bytes are discarded (a black hole with `drop: true`). */
  get dropping() {
    return this.#dropping;
  }

  /**
   * Starts (true) or ends (false) a partition: connections are accepted and held (a new one reaches
   * the target only once the partition ends), nothing is forwarded and nothing is closed. Bytes
   * are held and delivered in order when it ends, unless `drop` is set: then bytes arriving during
   * the partition are discarded.
   * @param {boolean} on
   * @param {{ drop?: boolean }} [options]
   */
  blackhole(on, options = {}) {
    this.#blackholed = on;
    this.#dropping = on && options.drop === true;
    if (!on) for (const link of this.links) link.resume();
  }

  /** Number of open proxied connections. */
  get connectionCount() {
    return this.links.size;
  }

  /** Destroys every proxied connection (both sides); the proxy keeps accepting new ones. */
  cutAll() {
    for (const link of [...this.links]) link.destroy();
  }

  /** Stops listening and destroys every connection. Idempotent. */
  async close() {
    this.cutAll();
    if (!this.#server.listening) return;
    await new Promise((resolve) => this.#server.close(() => resolve()));
  }
}

/**
 * Starts a proxy on a free 127.0.0.1 port forwarding to 127.0.0.1:`targetPort`.
 * @param {number} targetPort
 * @param {{ latencyMs?: number }} [options]
 */
export function startTcpProxy(targetPort, options) {
  return TcpProxy.start(targetPort, options);
}
