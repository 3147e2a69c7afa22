/**
 * A small network lab in Linux network namespaces, for real partitions (scenario 21): a server
 * namespace with the lock redis-servers, and client namespaces (the holder; the contenders), each
 * joined to the server namespace by its own veth pair. Everything lives inside namespaces this run
 * creates — the host's interfaces and services are never touched — and is named
 * `glp<parent pid>-…`, so that leftovers of a killed run are recognised (their pid is gone) and
 * removed by the next one.
 *
 * Cuts are iptables DROP rules inside a client namespace, so they cut that client only: OUTPUT
 * (client → server) and/or INPUT (server → client) by the node's port, or a random share of
 * packets (`-m statistic --mode random`). Needs root, iproute2 and iptables; {@link labUnavailable}
 * says why not where they are missing.
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { pidAlive, track } from "./cleanup.mjs";
import { sleep } from "./clock.mjs";
import { RESILIENT_CLIENT } from "./redis-server.mjs";

const PREFIX = "glp";
/** The server namespace's port of lock node i. */
const nodePort = (i) => 7000 + i;

const run = (args) => execFileSync(args[0], args.slice(1), { stdio: ["ignore", "pipe", "pipe"], encoding: "utf8" });
const inNs = (ns, ...args) => run(["ip", "netns", "exec", ns, ...args]);

/** Why no lab can be made here (a sentence), or undefined when it can. */
export function labUnavailable() {
  if (process.env.TORTURE_NO_NETNS) return "TORTURE_NO_NETNS is set";
  if (process.platform !== "linux") return `not Linux (${process.platform})`;
  if (process.getuid?.() !== 0) return "not root (network namespaces need CAP_SYS_ADMIN)";
  for (const tool of ["ip", "iptables"]) {
    try {
      run(["sh", "-c", `command -v ${tool}`]);
    } catch {
      return `${tool} not found (apt-get install iproute2 iptables)`;
    }
  }
  const probe = `${PREFIX}${process.pid}-probe`;
  try {
    run(["ip", "netns", "add", probe]);
    inNs(
      probe,
      "iptables",
      "-A",
      "OUTPUT",
      "-m",
      "statistic",
      "--mode",
      "random",
      "--probability",
      "0.5",
      "-j",
      "DROP",
    );
    return undefined;
  } catch (error) {
    return `cannot make a namespace with iptables rules: ${String(error.stderr ?? error.message).trim()}`;
  } finally {
    try {
      run(["ip", "netns", "del", probe]);
    } catch {
      // was not made
    }
  }
}

/**
 * Deletes the namespaces of earlier runs whose parent process is gone (their veths go with them),
 * after killing the processes left inside them.
 */
export function removeLeftovers() {
  let names = [];
  try {
    names = run(["ip", "netns", "list"])
      .split("\n")
      .map((line) => line.split(" ")[0]);
  } catch {
    return;
  }
  for (const name of names) {
    const match = new RegExp(`^${PREFIX}(\\d+)-`).exec(name);
    if (match && Number(match[1]) !== process.pid && !pidAlive(Number(match[1]))) {
      try {
        // Its servers and workers outlived a SIGKILLed run: they live in that namespace only.
        for (const pid of run(["ip", "netns", "pids", name]).split("\n").filter(Boolean)) {
          try {
            process.kill(Number(pid), "SIGKILL");
          } catch {
            // gone
          }
        }
        run(["ip", "netns", "del", name]);
      } catch {
        // already gone
      }
    }
  }
}

/** One lock redis-server inside the server namespace, reached by the parent through a Unix socket. */
class NamespacedRedis {
  #child;
  #pids = [];
  constructor(ns, index, dir) {
    this.ns = ns;
    this.port = nodePort(index);
    this.dir = dir;
    this.socket = join(dir, `node${index}.sock`);
  }

  async start() {
    // biome-ignore format: one redis-server option per line pair
    const args = [
      "netns", "exec", this.ns, "redis-server",
      "--port", String(this.port), "--bind", "0.0.0.0", "--protected-mode", "no",
      "--unixsocket", this.socket, "--unixsocketperm", "700",
      "--save", "", "--appendonly", "no", "--dir", this.dir, "--daemonize", "no", "--loglevel", "warning",
    ];
    this.#child = spawn("ip", args, { stdio: ["ignore", "ignore", "pipe"] });
    this.#pids.push(this.#child.pid);
    track(this.#child);
    const probe = new Redis({ path: this.socket, ...RESILIENT_CLIENT, lazyConnect: true });
    probe.on("error", () => undefined);
    try {
      for (let i = 0; i < 400; i++) {
        if (this.#child.exitCode !== null) throw new Error(`redis-server in ${this.ns} exited during start`);
        if ((await probe.ping().catch(() => "")) === "PONG") return this;
        await sleep(25);
      }
      throw new Error(`redis-server in ${this.ns} on ${this.port} did not start`);
    } finally {
      probe.disconnect();
    }
  }

  get running() {
    return this.#child !== undefined && this.#child.exitCode === null && this.#child.signalCode === null;
  }

  get pids() {
    return [...this.#pids];
  }

  /** An admin connection (through the Unix socket: never cut). */
  client() {
    const client = new Redis({ path: this.socket, ...RESILIENT_CLIENT });
    client.on("error", () => undefined);
    return client;
  }

  async stop() {
    if (!this.running) return;
    const exited = new Promise((resolve) => this.#child.once("exit", resolve));
    this.#child.kill("SIGKILL");
    await exited;
  }
}

/**
 * The lab: namespaces `<name>-srv` (lock nodes on ports 7000…, every address), and one per client
 * (`clients`: e.g. ["h", "c"]), client `c` at 10.201.<n>.2 seeing the servers at 10.201.<n>.1.
 */
export class NetLab {
  namespaces = [];
  /** @type {NamespacedRedis[]} */
  servers = [];
  #dir;

  constructor(clients) {
    this.name = `${PREFIX}${process.pid}-${Math.random().toString(36).slice(2, 6)}`;
    this.clients = clients;
    this.serverNs = `${this.name}-srv`;
  }

  /** The namespace of client `client`. */
  ns(client) {
    return `${this.name}-${client}`;
  }

  /** The servers' address as client `client` sees it. */
  serverHost(client) {
    return `10.201.${this.clients.indexOf(client) + 1}.1`;
  }

  /** Creates the namespaces and links, and starts `nodes` lock servers. */
  async start(nodes) {
    removeLeftovers();
    this.#dir = mkdtempSync(join(tmpdir(), "globallock-netlab-"));
    this.#add(this.serverNs);
    inNs(this.serverNs, "ip", "link", "set", "lo", "up");
    this.clients.forEach((client, i) => {
      const ns = this.ns(client);
      this.#add(ns);
      inNs(ns, "ip", "link", "set", "lo", "up");
      // The pair is made inside the server namespace, then one end moves: nothing on the host.
      const [serverEnd, clientEnd] = [`v${i}s`, `v${i}c`];
      inNs(this.serverNs, "ip", "link", "add", serverEnd, "type", "veth", "peer", "name", clientEnd);
      inNs(this.serverNs, "ip", "link", "set", clientEnd, "netns", ns);
      inNs(this.serverNs, "ip", "addr", "add", `10.201.${i + 1}.1/24`, "dev", serverEnd);
      inNs(this.serverNs, "ip", "link", "set", serverEnd, "up");
      inNs(ns, "ip", "addr", "add", `10.201.${i + 1}.2/24`, "dev", clientEnd);
      inNs(ns, "ip", "link", "set", clientEnd, "up");
    });
    this.servers = await Promise.all(
      Array.from({ length: nodes }, (_, i) => new NamespacedRedis(this.serverNs, i, this.#dir).start()),
    );
    return this;
  }

  #add(ns) {
    run(["ip", "netns", "add", ns]);
    this.namespaces.push(ns);
  }

  /** The ports of the lock nodes (as every client reaches them). */
  get ports() {
    return this.servers.map((server) => server.port);
  }

  /**
   * Cuts client `client` from lock nodes `nodes`: "both", "out" (client → server dropped) or "in"
   * (server → client dropped).
   */
  cut(client, nodes, direction = "both") {
    for (const node of nodes) {
      const port = String(nodePort(node));
      if (direction !== "in") this.#rule(client, "OUTPUT", "-p", "tcp", "--dport", port);
      if (direction !== "out") this.#rule(client, "INPUT", "-p", "tcp", "--sport", port);
    }
  }

  /** Drops a random `share` of the packets of client `client` both ways. */
  loss(client, share) {
    for (const chain of ["OUTPUT", "INPUT"]) {
      this.#rule(client, chain, "-m", "statistic", "--mode", "random", "--probability", String(share));
    }
  }

  /** Packets the DROP rules of client `client` have dropped so far (proof that a cut was real). */
  dropped(client) {
    const listing = inNs(this.ns(client), "iptables", "-L", "-n", "-v", "-x");
    return listing
      .split("\n")
      .map((line) => /^\s*(\d+)\s+\d+\s+DROP\b/.exec(line))
      .reduce((total, match) => total + (match ? Number(match[1]) : 0), 0);
  }

  /** Removes every cut and loss rule of client `client`. */
  heal(client) {
    inNs(this.ns(client), "iptables", "-F");
  }

  #rule(client, chain, ...match) {
    inNs(this.ns(client), "iptables", "-A", chain, ...match, "-j", "DROP");
  }

  /** Stops the servers and deletes every namespace (and with them the veths). Never throws. */
  async close() {
    await Promise.allSettled(this.servers.map((server) => server.stop()));
    for (const ns of this.namespaces.splice(0)) {
      try {
        run(["ip", "netns", "del", ns]);
      } catch {
        // already gone
      }
    }
    if (this.#dir !== undefined) rmSync(this.#dir, { recursive: true, force: true });
  }
}
