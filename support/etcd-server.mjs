/**
 * The launcher of real etcd servers for the tests and the benchmark: one node, or a cluster of
 * several members. Plain JavaScript (runnable by `node`), typed for TypeScript by
 * etcd-server.d.mts.
 *
 * Every member is a fresh data directory in its own temporary directory, listening for clients
 * and peers on free 127.0.0.1 ports chosen by the kernel (never the machine's own 2379/2380),
 * with a short heartbeat (50 ms) and election timeout (500 ms), so a failover takes about a second
 * and the shortest lease etcd grants is about one second. A cluster is stopped (and its
 * directories removed) by stop(), and killed when this process exits however that happens short of
 * a signal that kills Node itself.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Etcd3 } from "etcd3";
import { ExitBackstop, findBinary, freePort, HOST, sleep } from "./server-process.mjs";

export { HOST };

const INSTALL_HINT =
  "The etcd tests start their own servers; install etcd " +
  "(Debian/Ubuntu: `apt-get update && apt-get install -y etcd-server`, macOS: `brew install etcd`).";

/** Clusters started and not stopped, killed by the exit backstop. */
const live = new ExitBackstop();

/** Kills every etcd of this process still running and removes its directories (synchronous). */
export function killAllEtcdServers() {
  live.killAll();
}

/** The `etcd` binary on PATH; throws a clear message when etcd is not installed. */
export function etcdBinary() {
  return findBinary("etcd", [], INSTALL_HINT);
}

/** One member of an {@link EtcdCluster}: its name, ports and process. */
class EtcdMember {
  /** @type {import("node:child_process").ChildProcess | undefined} */
  child = undefined;
  log = "";

  constructor(name, clientPort, peerPort, dataDir) {
    this.name = name;
    this.clientPort = clientPort;
    this.peerPort = peerPort;
    this.dataDir = dataDir;
  }

  get endpoint() {
    return `http://${HOST}:${this.clientPort}`;
  }

  get peerUrl() {
    return `http://${HOST}:${this.peerPort}`;
  }

  get running() {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }
}

/** One etcd cluster (one or more members) on free 127.0.0.1 ports, in its own directory. */
export class EtcdCluster {
  #stopped = false;
  #token;

  constructor(members, dir) {
    this.members = members;
    this.dir = dir;
    this.#token = `globallock-${process.pid}-${Date.now()}`;
    live.add(this);
  }

  /** Starts `size` members (default 1) and resolves once the cluster has a leader. */
  static async start(options = {}) {
    const size = options.members ?? 1;
    etcdBinary();
    const dir = mkdtempSync(join(tmpdir(), "globallock-etcd-"));
    const members = [];
    for (let index = 0; index < size; index++) {
      members.push(
        new EtcdMember(`m${index}`, await freePort(2379, 2380), await freePort(2379, 2380), join(dir, `m${index}`)),
      );
    }
    const cluster = new EtcdCluster(members, dir);
    try {
      for (const member of members) cluster.#spawn(member, "new");
      await cluster.waitForLeader(options.startTimeoutMs ?? 20_000);
    } catch (error) {
      cluster.killSync();
      throw error;
    }
    return cluster;
  }

  /** Every member's client URL. */
  get endpoints() {
    return this.members.map((member) => member.endpoint);
  }

  #spawn(member, state) {
    const initialCluster = this.members.map((each) => `${each.name}=${each.peerUrl}`).join(",");
    const child = spawn(
      etcdBinary(),
      [
        "--name",
        member.name,
        "--data-dir",
        member.dataDir,
        "--listen-client-urls",
        member.endpoint,
        "--advertise-client-urls",
        member.endpoint,
        "--listen-peer-urls",
        member.peerUrl,
        "--initial-advertise-peer-urls",
        member.peerUrl,
        "--initial-cluster",
        initialCluster,
        "--initial-cluster-state",
        state,
        "--initial-cluster-token",
        this.#token,
        "--heartbeat-interval",
        "50",
        "--election-timeout",
        "500",
        "--logger",
        "zap",
        "--log-level",
        "error",
      ],
      { stdio: ["ignore", "pipe", "pipe"], detached: true },
    );
    const keep = (chunk) => {
      member.log = (member.log + chunk.toString()).slice(-8192);
    };
    child.stdout?.on("data", keep);
    child.stderr?.on("data", keep);
    child.on("error", keep);
    member.child = child;
  }

  /** A client on every member (the caller closes it). */
  client(options = {}) {
    return new Etcd3({ hosts: this.endpoints, ...options });
  }

  /**
   * Resolves with the leader once every running member agrees on one (polled every 50 ms); rejects
   * after `timeoutMs`.
   */
  async waitForLeader(timeoutMs = 20_000) {
    const deadline = Date.now() + timeoutMs;
    let lastError;
    for (;;) {
      try {
        const leader = await this.leader();
        if (leader !== undefined) return leader;
      } catch (error) {
        lastError = error;
      }
      if (Date.now() > deadline) {
        const logs = this.members.map((member) => `${member.name}: ${member.log}`).join("\n");
        throw new Error(`etcd had no leader within ${timeoutMs} ms (${lastError?.message ?? "no answer"})\n${logs}`);
      }
      await sleep(50);
    }
  }

  /** The member every running member names as leader, or undefined while they disagree. */
  async leader() {
    const running = this.members.filter((member) => member.running);
    if (running.length === 0) return undefined;
    const ids = await Promise.all(
      running.map(async (member) => {
        const client = new Etcd3({ hosts: member.endpoint, dialTimeout: 1000 });
        try {
          const status = await client.maintenance.status({}, { deadline: Date.now() + 1000 });
          return { member, id: status.header.member_id, leader: status.leader };
        } finally {
          client.close();
        }
      }),
    );
    const leaderId = ids[0]?.leader;
    if (leaderId === undefined || leaderId === "0" || ids.some((each) => each.leader !== leaderId)) return undefined;
    return ids.find((each) => each.id === leaderId)?.member;
  }

  /** SIGKILLs one member (default: the leader) and resolves with it. */
  async kill(member) {
    const victim = member ?? (await this.waitForLeader());
    await this.#signalAndWait(victim, "SIGKILL");
    return victim;
  }

  /** Starts a killed member again on its ports, with its data. */
  restart(member) {
    if (member.running) return;
    this.#spawn(member, "existing");
  }

  async #signalAndWait(member, signal) {
    const child = member.child;
    if (child === undefined || !member.running) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    try {
      process.kill(-child.pid, signal);
    } catch {
      // gone
    }
    await exited;
  }

  /** Stops every member (SIGTERM, SIGKILL after 5 s) and removes the directories. Idempotent. */
  async stop() {
    if (this.#stopped) return;
    this.#stopped = true;
    await Promise.all(
      this.members.map(async (member) => {
        const child = member.child;
        if (child === undefined || !member.running) return;
        const exited = new Promise((resolve) => child.once("exit", resolve));
        const timer = setTimeout(() => this.#killMember(member), 5000);
        try {
          process.kill(-child.pid, "SIGTERM");
        } catch {
          // gone
        }
        await exited;
        clearTimeout(timer);
      }),
    );
    live.delete(this);
    rmSync(this.dir, { recursive: true, force: true });
  }

  #killMember(member) {
    const pid = member.child?.pid;
    if (pid === undefined) return;
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      // gone
    }
  }

  /** Kills every member and removes the directories, synchronously (the exit backstop). */
  killSync() {
    for (const member of this.members) this.#killMember(member);
    live.delete(this);
    this.#stopped = true;
    try {
      rmSync(this.dir, { recursive: true, force: true });
    } catch {
      // best effort
    }
  }
}
