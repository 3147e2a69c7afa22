/**
 * The fault-test TCP proxy (support/tcp-proxy.mjs) against a real redis-server: forwarding,
 * latency per direction with chunk order kept, black-holing (held or dropped), cutting and closing.
 * Only lower bounds (or generous upper ones) on time.
 */
import { connect, type Socket } from "node:net";
import { performance } from "node:perf_hooks";
import type { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { RedisServer } from "../../support/redis-server.mjs";
import { startTcpProxy, type TcpProxy } from "../../support/tcp-proxy.mjs";
import { eventually, sleep } from "../helpers/wait.js";

let server: RedisServer;
const proxies: TcpProxy[] = [];
const clients: Redis[] = [];
const sockets: Socket[] = [];

beforeAll(async () => {
  server = await RedisServer.start();
});
afterEach(async () => {
  for (const client of clients.splice(0)) client.disconnect();
  for (const socket of sockets.splice(0)) socket.destroy();
  await Promise.all(proxies.splice(0).map((proxy) => proxy.close()));
});
afterAll(async () => {
  await server?.stop();
});

async function proxy(latencyMs?: number): Promise<TcpProxy> {
  const p = await startTcpProxy(server.port, latencyMs === undefined ? {} : { latencyMs });
  proxies.push(p);
  return p;
}

/** An ioredis client through the proxy, failing fast instead of reconnecting for long. */
function clientVia(p: TcpProxy): Redis {
  const client = server.client({ port: p.port, maxRetriesPerRequest: 0, retryStrategy: () => 20 });
  clients.push(client);
  return client;
}

/** A raw socket to the proxy that collects everything it receives. */
async function rawVia(p: TcpProxy): Promise<{ socket: Socket; received: () => string }> {
  const socket = connect({ host: "127.0.0.1", port: p.port });
  sockets.push(socket);
  let text = "";
  socket.on("data", (chunk: Buffer) => {
    text += chunk.toString("latin1");
  });
  socket.on("error", () => undefined);
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  return { socket, received: () => text };
}

/** Resolves "pending" if `promise` has not settled after `ms`. */
async function stillPendingAfter(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let settled = false;
  promise.then(
    () => {
      settled = true;
    },
    () => {
      settled = true;
    },
  );
  await sleep(ms);
  return !settled;
}

async function roundTrip(client: Redis): Promise<number> {
  const started = performance.now();
  expect(await client.ping()).toBe("PONG");
  return performance.now() - started;
}

describe("TcpProxy", () => {
  it("listens on a free 127.0.0.1 port and forwards commands to the target", async () => {
    const p = await proxy();
    expect(p.host).toBe("127.0.0.1");
    expect(p.port).not.toBe(server.port);
    expect(p.port).not.toBe(6379);
    expect(p.targetPort).toBe(server.port);
    const client = clientVia(p);
    expect(await client.ping()).toBe("PONG");
    await client.set("proxied", "yes");
    const direct = server.client();
    clients.push(direct);
    expect(await direct.get("proxied")).toBe("yes");
    expect(p.connectionCount).toBe(1);
  });

  it("adds the configured one-way latency in each direction: setLatency(150) makes a round trip ≥ 300 ms", async () => {
    const p = await proxy();
    const client = clientVia(p);
    await client.ping(); // connected
    p.setLatency(150);
    expect(p.latency).toEqual({ upstream: 150, downstream: 150 });
    for (let i = 0; i < 3; i++) expect(await roundTrip(client)).toBeGreaterThanOrEqual(300);

    p.setLatency(0);
    p.setLatency(120, "upstream");
    expect(p.latency).toEqual({ upstream: 120, downstream: 0 });
    expect(await roundTrip(client)).toBeGreaterThanOrEqual(120);
    p.setLatency(0, "upstream");
    p.setLatency(80, "downstream");
    expect(await roundTrip(client)).toBeGreaterThanOrEqual(80);

    // Without latency it is fast again: from a latency far above any delay a loaded machine adds,
    // back to none (a round trip still delayed would take 2 × 5 s).
    p.setLatency(5000);
    p.setLatency(0);
    expect(p.latency).toEqual({ upstream: 0, downstream: 0 });
    expect(await roundTrip(client)).toBeLessThan(5000);
  });

  it("applies an initial latency from the start options, from the first command on", async () => {
    const p = await proxy(100);
    const client = clientVia(p);
    const started = performance.now();
    expect(await client.ping()).toBe("PONG"); // at least one round trip (ioredis' ready check is another)
    expect(performance.now() - started).toBeGreaterThanOrEqual(200);
  });

  it("keeps chunks in order while the latency changes under a stream of pipelined commands", async () => {
    const p = await proxy();
    const client = clientVia(p);
    await client.del("counter");
    const replies: Promise<number>[] = [];
    for (let round = 0; round < 6; round++) {
      p.setLatency([200, 0, 120, 5, 60, 0][round] ?? 0);
      for (let i = 0; i < 50; i++) replies.push(client.incr("counter"));
      await sleep(15);
    }
    const values = await Promise.all(replies);
    // Each reply answers its own command: a reordered chunk would break the RESP stream.
    expect(values).toEqual(Array.from({ length: values.length }, (_, i) => i + 1));
  });

  it("black-holes like a partition: a command hangs until the partition heals, then completes", async () => {
    const p = await proxy();
    const client = clientVia(p);
    expect(await client.ping()).toBe("PONG");
    p.blackhole(true);
    expect(p.blackholed).toBe(true);
    const ping = client.ping();
    expect(await stillPendingAfter(ping, 500)).toBe(true);
    // Nothing was closed: the connection is still there.
    expect(p.connectionCount).toBe(1);
    expect(client.status).toBe("ready");
    p.blackhole(false);
    expect(await ping).toBe("PONG");
    expect(await client.ping()).toBe("PONG");
  });

  it("accepts and holds new connections while black-holed; they reach Redis once it heals", async () => {
    const p = await proxy();
    const direct = server.client();
    clients.push(direct);
    p.blackhole(true);
    const raw = await rawVia(p); // the TCP connection is accepted
    raw.socket.write("CLIENT SETNAME held-by-proxy\r\nPING\r\n");
    await sleep(300);
    expect(raw.received()).toBe("");
    expect(String(await direct.client("LIST"))).not.toContain("held-by-proxy");
    p.blackhole(false);
    await eventually(() => raw.received() === "+OK\r\n+PONG\r\n", 5000);
    expect(String(await direct.client("LIST"))).toContain("held-by-proxy");
  });

  it("drops bytes silently with blackhole(true, { drop: true }): no reply ever comes, nothing is closed", async () => {
    const p = await proxy();
    const raw = await rawVia(p);
    raw.socket.write("PING\r\n");
    await eventually(() => raw.received() === "+PONG\r\n");
    let closed = false;
    raw.socket.on("close", () => {
      closed = true;
    });
    p.blackhole(true, { drop: true });
    expect(p.dropping).toBe(true);
    raw.socket.write("ECHO lost\r\n");
    await sleep(300);
    p.blackhole(false);
    expect(p.dropping).toBe(false);
    raw.socket.write("ECHO kept\r\n");
    await eventually(() => raw.received().includes("kept"));
    expect(raw.received()).toBe("+PONG\r\n$4\r\nkept\r\n");
    expect(closed).toBe(false);
  });

  it("cutAll() destroys every connection; clients reconnect through the proxy afterwards", async () => {
    const p = await proxy();
    const client = clientVia(p);
    expect(await client.ping()).toBe("PONG");
    const raw = await rawVia(p);
    const rawClosed = new Promise<void>((resolve) => raw.socket.once("close", () => resolve()));
    await eventually(() => p.connectionCount === 2);
    const closed = new Promise<void>((resolve) => client.once("close", () => resolve()));
    p.cutAll();
    await closed;
    await rawClosed;
    expect(p.connectionCount).toBe(0);
    await eventually(async () => (await client.ping().catch(() => "")) === "PONG");
  });

  it("passes a server-side close on: killing Redis closes the client's connection", async () => {
    const target = await RedisServer.start();
    try {
      const p = await startTcpProxy(target.port);
      proxies.push(p);
      const raw = await rawVia(p);
      raw.socket.write("PING\r\n");
      await eventually(() => raw.received() === "+PONG\r\n");
      const closed = new Promise<void>((resolve) => raw.socket.once("close", () => resolve()));
      await target.kill();
      await closed;
      await eventually(() => p.connectionCount === 0);
    } finally {
      await target.stop();
    }
  });

  it("close() stops listening and ends every connection", async () => {
    const p = await startTcpProxy(server.port);
    const raw = await rawVia(p);
    const closed = new Promise<void>((resolve) => raw.socket.once("close", () => resolve()));
    await p.close();
    await closed;
    await p.close(); // idempotent
    const refused = await new Promise<string>((resolve) => {
      const socket = connect({ host: "127.0.0.1", port: p.port });
      socket.once("connect", () => {
        socket.destroy();
        resolve("connected");
      });
      socket.once("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? "error"));
    });
    expect(refused).toBe("ECONNREFUSED");
  });

  it("rejects a bad target port or latency", async () => {
    await expect(startTcpProxy(0)).rejects.toThrow(RangeError);
    const p = await proxy();
    expect(() => p.setLatency(-1)).toThrow(RangeError);
    expect(() => p.setLatency(Number.NaN)).toThrow(RangeError);
  });
});
