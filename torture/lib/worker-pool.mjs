/**
 * Worker processes as the parent sees them: forked with an IPC channel, configured by a "start"
 * message, released together by "go", observed through the events they send, and stopped —
 * gracefully ("stop", then a natural exit) or by force — always.
 */
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { killHard, track } from "./cleanup.mjs";
import { now, within } from "./clock.mjs";

const WORKER_PATH = fileURLToPath(new URL("../worker.mjs", import.meta.url));

/** One forked worker. */
export class WorkerHandle {
  /** Every message received, in order, each with `receivedAt`. */
  events = [];
  /** The worker's final statistics, once it sent "done". */
  stats = undefined;
  /** Set by the scenario when it kills the worker on purpose. */
  killedOnPurpose = false;
  #waiters = new Set();
  #stderr = "";

  /**
   * @param {object} config the worker's configuration (see worker.mjs)
   * @param {(event: object) => void} onEvent called for every message, after it is recorded
   */
  constructor(config, onEvent) {
    this.config = config;
    this.id = config.id;
    // config.netns: the worker runs inside that network namespace (`ip netns exec NS node worker.mjs`,
    // which execs node in place: same pid, same IPC channel).
    const inNamespace = config.netns
      ? { execPath: "ip", execArgv: ["netns", "exec", config.netns, process.execPath] }
      : {};
    this.child = fork(WORKER_PATH, [], {
      stdio: ["ignore", "ignore", "pipe", "ipc"],
      serialization: "advanced",
      ...inNamespace,
    });
    this.pid = this.child.pid;
    track(this.child);
    this.child.stderr.on("data", (chunk) => {
      this.#stderr = (this.#stderr + chunk.toString()).slice(-4000);
    });
    this.exited = new Promise((resolve) => {
      this.child.once("exit", (code, signal) => resolve({ code, signal, at: now() }));
    });
    this.child.on("message", (message) => {
      const event = { ...message, receivedAt: now() };
      this.events.push(event);
      if (event.type === "done") this.stats = event.stats;
      onEvent(event);
      for (const waiter of this.#waiters) waiter(event);
    });
    this.child.on("error", () => undefined);
  }

  /** The last few KB the worker wrote to stderr (for failure reports). */
  get stderr() {
    return this.#stderr;
  }

  /** True while the process runs (a stopped process counts as running). */
  get alive() {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Sends a message if the channel is still open. */
  send(message) {
    if (this.child.connected) this.child.send(message, () => undefined);
  }

  /** Sends a signal (SIGSTOP, SIGCONT, SIGKILL) to the process. */
  signal(name) {
    if (this.alive) this.child.kill(name);
  }

  /** Resolves with the first event (already received or future) that matches, or rejects after `ms`. */
  waitFor(predicate, ms, label) {
    const earlier = this.events.find(predicate);
    if (earlier !== undefined) return Promise.resolve(earlier);
    return this.waitForNext(predicate, ms, label);
  }

  /** Resolves with the first future event that matches, or rejects after `ms`. */
  waitForNext(predicate, ms, label) {
    let listener;
    const found = new Promise((resolve) => {
      listener = (event) => {
        if (predicate(event)) resolve(event);
      };
      this.#waiters.add(listener);
    });
    return within(found, ms, `${this.id}: ${label}`).finally(() => this.#waiters.delete(listener));
  }
}

/** A set of workers started together. */
export class WorkerPool {
  /** @type {WorkerHandle[]} */
  workers = [];
  /** Every event of every worker, in arrival order. */
  events = [];
  #listeners = new Set();

  /** Forks one worker per config, sends each its config, and waits until all are ready. */
  async start(configs, readyTimeoutMs = 20_000) {
    for (const config of configs) {
      const handle = new WorkerHandle(config, (event) => {
        this.events.push(event);
        for (const listener of this.#listeners) listener(event);
      });
      this.workers.push(handle);
      handle.send({ type: "start", config });
    }
    await Promise.all(
      this.workers.map((w) =>
        Promise.race([
          w.waitFor((e) => e.type === "ready", readyTimeoutMs, "ready"),
          w.exited.then(({ code }) => {
            throw new Error(`worker ${w.id} exited (code ${code}) before it was ready: ${w.stderr}`);
          }),
        ]),
      ),
    );
  }

  /** Lets every worker start its loop at (nearly) the same moment. */
  go() {
    for (const worker of this.workers) worker.send({ type: "go" });
  }

  /** Sends `message` to every live worker except those in `except`. */
  broadcast(message, except = []) {
    for (const worker of this.workers) if (!except.includes(worker)) worker.send(message);
  }

  /** Calls `listener` for every future event of any worker; returns the function that stops it. */
  listen(listener) {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Resolves with the first future event of any worker that matches, or rejects after `ms`. */
  waitForEvent(predicate, ms, label) {
    let stop;
    const found = new Promise((resolve) => {
      stop = this.listen((event) => {
        if (predicate(event)) resolve(event);
      });
    });
    return within(found, ms, label).finally(() => stop());
  }

  /** Resolves once every worker has exited (workers with a fixed number of sections end by themselves). */
  async finished(ms) {
    await within(Promise.all(this.workers.map((w) => w.exited)), ms, "workers to finish their sections");
  }

  /**
   * Stops every worker: SIGCONT (in case it is stopped), "stop", and a natural exit within
   * `graceMs`; a worker still running then is killed. Resolves to the ids of workers that had to be
   * killed (they did not exit on their own: a hang or a leaked handle).
   */
  async stop(graceMs = 10_000) {
    for (const worker of this.workers) {
      worker.signal("SIGCONT");
      worker.send({ type: "stop" });
    }
    const forced = [];
    await Promise.all(
      this.workers.map(async (worker) => {
        const exited = await within(worker.exited, graceMs, "exit").catch(() => undefined);
        if (exited === undefined) {
          forced.push(worker.id);
          killHard(worker.child);
          await worker.exited;
        }
      }),
    );
    return forced;
  }

  /** Kills every worker at once (for failures and timeouts). */
  async kill() {
    for (const worker of this.workers) killHard(worker.child);
    await Promise.all(this.workers.map((w) => w.exited));
  }
}
