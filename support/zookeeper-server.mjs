/**
 * The launcher of real ZooKeeper servers for the tests: one standalone server, or an ensemble of
 * several members. Plain JavaScript (runnable by `node`), typed for TypeScript by
 * zookeeper-server.d.mts.
 *
 * Debian's `zookeeper` package (3.8) brings the jar; its manifest names the other jars it needs in
 * /usr/share/java, so the class path is the two ZooKeeper jars and a logger. Every member gets a
 * fresh directory (its zoo.cfg, myid and data) in one temporary directory, listens for clients,
 * peers and elections on free 127.0.0.1 ports chosen by the kernel (never the machine's own 2181),
 * with a 200 ms tick (sessions of 400 ms to 30 s; a lost leader is noticed in about a second),
 * no fsync (a test's data need not survive a power cut), no admin server, every four-letter word
 * allowed, no cap on connections from one address. The JVM is kept cheap to start (128 MB heap at
 * most, serial GC, the C1 compiler only, class data sharing): the tests run on 2 cores.
 *
 * A server answers `ruok` before it serves, so a member counts as up once `srvr` reports its
 * mode, and the ensemble once a client's write succeeds. An ensemble is stopped (its directory
 * removed) by stop(), and killed when this process exits however that happens short of a signal
 * that kills Node itself.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import zookeeper from "node-zookeeper-client";
import { ExitBackstop, findBinary, freePort, HOST, ServerProcess, sleep } from "./server-process.mjs";

export { HOST };

const INSTALL_HINT =
  "The ZooKeeper tests start their own servers; install ZooKeeper and a Java runtime " +
  "(Debian/Ubuntu: `apt-get update && apt-get install -y zookeeper default-jre-headless`).";

/** Where Debian's zookeeper package puts its jars. */
const JAR_DIR = "/usr/share/java";

/** The class path: the server and its wire format (the jar's manifest names the rest), and a logger. */
const CLASS_PATH = ["zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar", "slf4j-simple.jar"]
  .map((jar) => join(JAR_DIR, jar))
  .join(":");

/** JVM settings for a cheap start on a small machine, and a quiet log. */
const JVM_ARGS = [
  "-Xmx128m",
  "-Xms16m",
  "-XX:+UseSerialGC",
  "-XX:TieredStopAtLevel=1",
  "-Xshare:auto",
  "-Djava.net.preferIPv4Stack=true",
  "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
  "-Dzookeeper.jmx.log4j.disable=true",
];

/** The tick every timeout of the servers counts in, in ms. */
const TICK_MS = 200;

/** Ensembles started and not stopped, killed by the exit backstop. */
const live = new ExitBackstop();

/** Kills every ZooKeeper server of this process still running and removes its directories (synchronous). */
export function killAllZooKeeperServers() {
  live.killAll();
}

/** The `java` binary; throws a clear message when Java or ZooKeeper's jar is missing. */
export function javaBinary() {
  const java = findBinary("java", ["/usr/bin"], INSTALL_HINT);
  findBinary("zookeeper.jar", [JAR_DIR], INSTALL_HINT);
  return java;
}

/**
 * Sends the four-letter word `word` to the server on `port` and resolves with its whole answer
 * ("" when it refuses the connection or says nothing within `timeoutMs`).
 */
export function fourLetterWord(port, word, timeoutMs = 2000) {
  return new Promise((resolve) => {
    let answer = "";
    const socket = connect({ host: HOST, port });
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    const timer = setTimeout(done, timeoutMs);
    socket.on("connect", () => socket.write(word));
    socket.on("data", (chunk) => {
      answer += chunk.toString("utf8");
    });
    socket.on("end", done);
    socket.on("error", done);
  });
}

/** One member of a {@link ZooKeeperEnsemble}: its id, ports, directory and process. */
class ZooKeeperMember {
  constructor(id, clientPort, quorumPort, electionPort, dir) {
    this.id = id;
    this.clientPort = clientPort;
    this.quorumPort = quorumPort;
    this.electionPort = electionPort;
    this.dir = dir;
    this.process = new ServerProcess(`zookeeper member ${id}`);
  }

  /** `127.0.0.1:<clientPort>`. */
  get address() {
    return `${HOST}:${this.clientPort}`;
  }

  get running() {
    return this.process.running;
  }

  get pid() {
    return this.process.pid;
  }

  log() {
    return this.process.log();
  }

  /** What `srvr` says its mode is ("standalone", "leader", "follower"), or undefined while it does not serve. */
  async mode() {
    const answer = await fourLetterWord(this.clientPort, "srvr");
    return /^Mode: (\w+)/m.exec(answer)?.[1];
  }
}

/** One ZooKeeper ensemble (a standalone server, or several members) on free 127.0.0.1 ports. */
export class ZooKeeperEnsemble {
  #stopped = false;

  constructor(members, dir) {
    this.members = members;
    this.dir = dir;
    live.add(this);
  }

  /**
   * Starts `members` servers (default 1: standalone) and resolves once a client's write succeeds.
   * A member that cannot bind its ports (another process took one since it was found free) fails
   * the start, which is tried again on other ports, 3 times in all.
   */
  static async start(options = {}) {
    javaBinary();
    const timeoutMs = options.startTimeoutMs ?? 60_000;
    for (let attempt = 1; ; attempt++) {
      const ensemble = await ZooKeeperEnsemble.#onFreePorts(options.members ?? 1);
      try {
        for (const member of ensemble.members) ensemble.#configure(member);
        await Promise.all(ensemble.members.map((member) => ensemble.#spawn(member, timeoutMs)));
        await ensemble.waitForWrite(timeoutMs);
        return ensemble;
      } catch (error) {
        ensemble.killSync();
        if (attempt === 3 || !/exited during start/.test(String(error))) throw error;
      }
    }
  }

  /** An ensemble of `size` members, not started, on distinct free ports, in a new temporary directory. */
  static async #onFreePorts(size) {
    const dir = mkdtempSync(join(tmpdir(), "globallock-zookeeper-"));
    const taken = [2181];
    const members = [];
    for (let id = 1; id <= size; id++) {
      const ports = [];
      // The kernel may hand out a port it handed out a moment ago: each member needs its own three.
      for (let index = 0; index < 3; index++) {
        const port = await freePort(...taken);
        taken.push(port);
        ports.push(port);
      }
      members.push(new ZooKeeperMember(id, ports[0], ports[1], ports[2], join(dir, `m${id}`)));
    }
    return new ZooKeeperEnsemble(members, dir);
  }

  /** Every member's address, comma-separated: a client's connection string. */
  get connectionString() {
    return this.members.map((member) => member.address).join(",");
  }

  /** Writes `member`'s zoo.cfg and myid. */
  #configure(member) {
    mkdirSync(join(member.dir, "data"), { recursive: true });
    writeFileSync(join(member.dir, "data", "myid"), `${member.id}\n`);
    const lines = [
      `tickTime=${TICK_MS}`,
      "initLimit=20",
      "syncLimit=5",
      `dataDir=${join(member.dir, "data")}`,
      `clientPort=${member.clientPort}`,
      `clientPortAddress=${HOST}`,
      `minSessionTimeout=${2 * TICK_MS}`,
      "maxSessionTimeout=30000",
      "4lw.commands.whitelist=*",
      "admin.enableServer=false",
      "forceSync=no",
      "preAllocSize=1024",
      "autopurge.purgeInterval=0",
      // Every client of the tests comes from 127.0.0.1: no cap per address (the default is 60).
      "maxClientCnxns=0",
    ];
    if (this.members.length > 1) {
      for (const each of this.members) lines.push(`server.${each.id}=${HOST}:${each.quorumPort}:${each.electionPort}`);
    }
    writeFileSync(join(member.dir, "zoo.cfg"), `${lines.join("\n")}\n`);
  }

  /** Starts `member` and resolves once `srvr` reports its mode (a member serves only in a quorum). */
  #spawn(member, timeoutMs) {
    const args = [...JVM_ARGS, "-cp", CLASS_PATH, "org.apache.zookeeper.server.quorum.QuorumPeerMain", "zoo.cfg"];
    return member.process.start(
      javaBinary(),
      args,
      { cwd: member.dir },
      { where: member.address, timeoutMs, ready: async () => (await member.mode()) !== undefined },
    );
  }

  /**
   * Resolves once a client on every member creates (and, closing, drops) an ephemeral node: the
   * ensemble serves writes. Rejects after `timeoutMs`.
   */
  async waitForWrite(timeoutMs = 30_000) {
    const deadline = Date.now() + timeoutMs;
    const client = this.client({ sessionTimeout: 4000 });
    try {
      for (;;) {
        const written = await new Promise((resolve) => {
          const timer = setTimeout(() => resolve(false), 2000);
          client.create(`/launcher-ready-${process.pid}`, zookeeper.CreateMode.EPHEMERAL, (error) => {
            clearTimeout(timer);
            resolve(error === null || error?.getCode?.() === zookeeper.Exception.NODE_EXISTS);
          });
        });
        if (written) return;
        if (Date.now() > deadline) {
          const logs = this.members.map((member) => `member ${member.id}: ${member.log()}`).join("\n");
          throw new Error(`ZooKeeper accepted no write within ${timeoutMs} ms\n${logs}`);
        }
        await sleep(100);
      }
    } finally {
      client.close();
    }
  }

  /** A connected client of `node-zookeeper-client` on every running member (the caller closes it). */
  client(options = {}) {
    const client = zookeeper.createClient(this.connectionString, { spinDelay: 100, ...options });
    client.connect();
    return client;
  }

  /** Resolves with the member whose `srvr` says "leader" (or "standalone"); rejects after `timeoutMs`. */
  async waitForLeader(timeoutMs = 30_000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const leader = await this.leader();
      if (leader !== undefined) return leader;
      if (Date.now() > deadline) throw new Error(`ZooKeeper had no leader within ${timeoutMs} ms`);
      await sleep(100);
    }
  }

  /** The running member that leads (or runs standalone), or undefined during an election. */
  async leader() {
    const running = this.members.filter((member) => member.running);
    const modes = await Promise.all(running.map((member) => member.mode()));
    return running.find((_member, index) => modes[index] === "leader" || modes[index] === "standalone");
  }

  /** SIGKILLs one member (default: the leader) and resolves with it once it exited. */
  async kill(member) {
    const victim = member ?? (await this.waitForLeader());
    await victim.process.kill();
    return victim;
  }

  /** Stops one member (SIGTERM: a clean shutdown, default the leader) and resolves with it once it exited. */
  async stopMember(member) {
    const victim = member ?? (await this.waitForLeader());
    const child = victim.process.child;
    if (child === undefined || !victim.running) return victim;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    victim.process.signal("SIGTERM");
    await exited;
    return victim;
  }

  /** Starts a killed or stopped member again, on its ports and with its data; resolves once it serves. */
  async restart(member, timeoutMs = 60_000) {
    if (member.running) return;
    await member.process.respawn(() => this.#spawn(member, timeoutMs));
  }

  /** Kills every member (SIGKILL: nothing of a test's ensemble needs keeping) and removes the directory. Idempotent. */
  async stop() {
    if (this.#stopped) return;
    this.#stopped = true;
    await Promise.all(
      this.members.map((member) => {
        member.process.stopped = true;
        return member.process.kill();
      }),
    );
    live.delete(this);
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** Kills every member and removes the directory, synchronously (the exit backstop). */
  killSync() {
    this.#stopped = true;
    for (const member of this.members) member.process.killSync();
    live.delete(this);
    try {
      rmSync(this.dir, { recursive: true, force: true });
    } catch {
      // best effort in an exit handler
    }
  }
}
