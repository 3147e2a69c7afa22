/**
 * What the launchers of real servers for the tests and the benchmark share (postgres-server.mjs,
 * mariadb-server.mjs, etcd-server.mjs): the one address they use, free ports, binaries looked up
 * with an install hint, the exit backstop that kills whatever a test left running, and
 * {@link ServerProcess}: one server process with its recent output, started and awaited until it
 * answers, killed, restarted. Plain JavaScript (runnable by `node`); only the other launchers use it.
 */
import { execFileSync, spawn } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";

/** The only address anything here listens on or connects to. */
export const HOST = "127.0.0.1";

/** Resolves after `ms` milliseconds. */
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Asks the kernel for a free TCP port on 127.0.0.1, never one of `avoid` (the machine's own services). */
export async function freePort(...avoid) {
  for (;;) {
    const port = await new Promise((resolve, reject) => {
      const server = createServer();
      server.unref();
      server.once("error", reject);
      server.listen(0, HOST, () => {
        const address = server.address();
        server.close(() => (typeof address === "object" && address !== null ? resolve(address.port) : reject()));
      });
    });
    if (!avoid.includes(port)) return port;
  }
}

/**
 * The path of `name` on PATH, else in one of `dirs`; throws "`name` was not found … `hint`" when
 * it is nowhere.
 */
export function findBinary(name, dirs, hint) {
  try {
    const found = execFileSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8" }).trim();
    if (found !== "") return found;
  } catch {
    // not on PATH
  }
  for (const dir of dirs) if (existsSync(join(dir, name))) return join(dir, name);
  const where = dirs.length === 0 ? "on PATH" : `on PATH or in ${dirs.join(" or ")}`;
  throw new Error(`${name} was not found ${where}. ${hint}`);
}

/**
 * A set of live servers (anything with `killSync()`) killed when this process exits, however that
 * happens short of a signal that kills Node itself. `killAll()` kills them now.
 */
export class ExitBackstop {
  #live = new Set();
  #installed = false;

  add(server) {
    this.#live.add(server);
    if (this.#installed) return;
    this.#installed = true;
    process.once("exit", () => this.killAll());
  }

  delete(server) {
    this.#live.delete(server);
  }

  killAll() {
    for (const server of this.#live) server.killSync();
  }
}

/**
 * One server process: its child, the last 8 KB of its output, and whether it was stopped for
 * good. `group`: the server runs in a process group of its own (spawn it `detached`), and kills
 * reach the whole group (a postmaster's backends, say).
 */
export class ServerProcess {
  /** @type {import("node:child_process").ChildProcess | undefined} */
  child = undefined;
  stopped = false;
  #log = "";

  constructor(name, group = false) {
    this.name = name;
    this.group = group;
  }

  /** Process id of the server (undefined while stopped). */
  get pid() {
    return this.child?.pid;
  }

  /** True while the server runs. */
  get running() {
    const child = this.child;
    return child !== undefined && child.exitCode === null && child.signalCode === null;
  }

  /** The last few KB of the server's (and its tools') output. */
  log() {
    return this.#log;
  }

  /** Keeps `child`'s output in the log. */
  capture(child) {
    const keep = (chunk) => {
      this.#log = (this.#log + chunk.toString()).slice(-8000);
    };
    child.stdout?.on("data", keep);
    child.stderr?.on("data", keep);
  }

  /** Runs a tool (initdb, mariadb-install-db) to its end; rejects with its output when it fails. */
  runTool(command, args, options = {}) {
    return new Promise((resolve, reject) => {
      const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"], ...options });
      this.capture(child);
      child.once("error", reject);
      child.once("exit", (code) =>
        code === 0 ? resolve() : reject(new Error(`${command} failed (exit ${code}): ${this.#log}`)),
      );
    });
  }

  /**
   * Spawns the server and resolves once `ready()` says it answers (polled every 50 ms); rejects
   * when it cannot be spawned, exits meanwhile, or is not ready within `timeoutMs`. `where` names
   * it in messages ("127.0.0.1:port").
   */
  async start(command, args, options, { where, timeoutMs, ready }) {
    if (this.stopped) throw new Error(`${this.name} on ${where} was stopped`);
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"], detached: this.group, ...options });
    this.child = child;
    let spawnError;
    child.on("error", (error) => {
      spawnError = error;
    });
    this.capture(child);
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (spawnError !== undefined) throw new Error(`${this.name} could not be started: ${spawnError.message}`);
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`${this.name} on ${where} exited during start: ${this.#log}`);
      }
      if (await ready()) return;
      await sleep(50);
    }
    throw new Error(`${this.name} on ${where} did not accept queries in time: ${this.#log}`);
  }

  /** Sends `signal` to the server (its group, for a group), ignoring one that is gone. */
  signal(signal) {
    const child = this.child;
    if (child?.pid === undefined) return;
    try {
      if (this.group) process.kill(-child.pid, signal);
      else child.kill(signal);
    } catch {
      // already gone
    }
  }

  /** SIGKILLs the server (a crash) and waits for it to exit. */
  async kill() {
    const child = this.child;
    if (child === undefined) return;
    if (this.running) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      this.signal("SIGKILL");
      await exited;
    } else {
      this.signal("SIGKILL"); // a group's backends may outlive their parent
    }
    if (this.child === child) this.child = undefined;
  }

  /** Starts the server again with `spawnAgain` (its port may still be held: tried 20 times, 100 ms apart). */
  async respawn(spawnAgain) {
    for (let attempt = 0; ; attempt++) {
      try {
        await spawnAgain();
        return;
      } catch (error) {
        await this.kill();
        if (this.stopped || attempt >= 20) throw error;
        await sleep(100);
      }
    }
  }

  /** Kills the server synchronously, for good (exit handlers). */
  killSync() {
    this.stopped = true;
    this.signal("SIGKILL");
  }
}

/**
 * Makes a server with `create()` and readies it with `begin(server)`; on failure stops it and
 * tries again with a new one (another free port), 4 times in all.
 */
export async function startWithRetries(create, begin) {
  for (let attempt = 0; ; attempt++) {
    const server = await create();
    try {
      await begin(server);
      return server;
    } catch (error) {
      await server.stop();
      if (attempt >= 3) throw error;
    }
  }
}

/**
 * Stops `server` (a {@link ServerProcess}) for good, removes its directory `dir` and forgets `owner`
 * in `live` (an {@link ExitBackstop}). Never rejects.
 */
export async function stopAndRemove(server, dir, live, owner) {
  server.stopped = true;
  await server.kill();
  rmSync(dir, { recursive: true, force: true });
  live.delete(owner);
}

/** {@link stopAndRemove}, synchronously, for exit handlers. */
export function killAndRemoveSync(server, dir, live, owner) {
  server.killSync();
  try {
    rmSync(dir, { recursive: true, force: true });
  } catch {
    // best effort in an exit handler
  }
  live.delete(owner);
}
