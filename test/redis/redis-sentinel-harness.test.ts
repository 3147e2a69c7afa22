/**
 * The Sentinel harness (startSentinelGroup in support/redis-server.mjs) with real processes: one
 * master, one replica and three Sentinels on free 127.0.0.1 ports. A write through an ioredis
 * Sentinel client reaches the replica; killing the master makes the Sentinels promote the replica;
 * the same client then writes to the new master.
 */
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SentinelGroup, startSentinelGroup } from "../../support/redis-server.mjs";
import { eventually } from "../helpers/wait.js";

describe("startSentinelGroup", () => {
  let group: SentinelGroup | undefined;
  const clients: Redis[] = [];
  const sentinel = (): SentinelGroup => {
    if (group === undefined) throw new Error("the group did not start");
    return group;
  };

  beforeAll(async () => {
    group = await startSentinelGroup();
  }, 30_000);
  afterAll(async () => {
    for (const client of clients) client.disconnect();
    const started = group;
    await group?.stop();
    // stop() ends every process, whatever happened in the tests.
    for (const server of [...(started?.servers ?? []), ...(started?.sentinels ?? [])]) {
      expect(server.running).toBe(false);
      expect(server.stopped).toBe(true);
    }
  });

  it("starts a master, an in-sync replica and three Sentinels that know them, all on loopback", async () => {
    const g = sentinel();
    expect(g.masterName).toBe("mymaster");
    expect(g.sentinels).toHaveLength(3);
    expect(g.replicas).toHaveLength(1);
    const ports = [g.master.port, g.replica.port, ...g.sentinelPorts];
    expect(new Set(ports).size).toBe(5);
    expect(ports).not.toContain(6379);
    expect(g.masterPort).toBe(g.master.port);
    expect(await g.masterAddresses()).toEqual(g.sentinels.map(() => ({ host: "127.0.0.1", port: g.master.port })));
    const replica = g.replica.client();
    clients.push(replica);
    const info = await replica.info("replication");
    expect(info).toContain("role:slave");
    expect(info).toContain("master_link_status:up");
    expect(info).toContain(`master_port:${g.master.port}`);
    const admin = g.sentinelClient(0);
    const known = (await admin.call("SENTINEL", "replicas", g.masterName)) as string[][];
    expect(known.map((fields) => fields[fields.indexOf("port") + 1])).toEqual([String(g.replica.port)]);
  });

  it("writes through the Sentinel client to the master, and the write reaches the replica", async () => {
    const g = sentinel();
    const client = g.client();
    await client.set("sentinel:before", "written-via-sentinel");
    const master = g.master.client();
    const replica = g.replica.client();
    clients.push(master, replica);
    expect(await master.get("sentinel:before")).toBe("written-via-sentinel");
    await eventually(async () => (await replica.get("sentinel:before")) === "written-via-sentinel");
    // The replica refuses writes: the Sentinel client really talks to the master.
    await expect(replica.set("sentinel:direct", "x")).rejects.toThrow(/READONLY/);
  });

  it("promotes the replica when the master is killed, and the same Sentinel client writes to it", async () => {
    const g = sentinel();
    const client = g.client();
    await client.set("sentinel:k", "1");
    const started = Date.now();
    await g.master.kill();
    const failover = await g.waitForFailover({ timeoutMs: 15_000 });
    const took = Date.now() - started;
    console.log(`Sentinel failover: the replica was promoted ${took} ms after the master was killed`);
    expect(failover.port).toBe(g.replica.port);
    expect(failover.server).toBe(g.replica);
    expect(g.masterPort).toBe(g.replica.port);
    expect(took).toBeLessThan(15_000); // generous: down-after 500 ms, failover-timeout 2000 ms
    expect(await g.masterAddresses()).toEqual(g.sentinels.map(() => ({ host: "127.0.0.1", port: g.replica.port })));

    // The same client finds the new master through the Sentinels (it may need a reconnect or two).
    await eventually(async () => (await client.set("sentinel:after", "2").catch(() => null)) === "OK", 10_000);
    const promoted = g.replica.client();
    clients.push(promoted);
    expect(await promoted.info("replication")).toContain("role:master");
    expect(await promoted.get("sentinel:after")).toBe("2");
    expect(await promoted.get("sentinel:k")).toBe("1"); // replicated before the kill
    expect(await client.get("sentinel:after")).toBe("2");
  }, 20_000);
});
