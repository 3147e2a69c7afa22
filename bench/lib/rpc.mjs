/**
 * Minimal request/response over the IPC channel of a forked Node process. Requests carry an id;
 * several may be pending at once. Used to drive bench/worker.mjs from bench/run.mjs.
 */
import { fork } from "node:child_process";
import { onCleanup } from "./cleanup.mjs";

/**
 * A forked worker process that answers {@link WorkerProcess.call} requests.
 */
export class WorkerProcess {
  #child;
  #pending = new Map();
  #nextId = 1;
  #unregister;

  /** @param {string} modulePath path of a module that calls {@link serve} */
  constructor(modulePath) {
    this.#child = fork(modulePath, [], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
    this.#unregister = onCleanup(() => this.#child.kill("SIGKILL"));
    this.#child.on("message", (message) => {
      const entry = this.#pending.get(message.id);
      if (entry === undefined) return;
      this.#pending.delete(message.id);
      if (message.error !== undefined) entry.reject(new Error(`worker: ${message.error}`));
      else entry.resolve(message.result);
    });
    this.#child.once("exit", (code, signal) => {
      for (const entry of this.#pending.values()) entry.reject(new Error(`worker exited (${code ?? signal})`));
      this.#pending.clear();
    });
  }

  /**
   * Sends `{ cmd, ...args }` and resolves with the handler's result.
   * @param {string} cmd
   * @param {object} [args]
   */
  call(cmd, args = {}) {
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#child.send({ id, cmd, args });
    });
  }

  /** Asks the worker to exit and waits for it (SIGKILL after 3 s). */
  async close() {
    const child = this.#child;
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.disconnect();
      const timer = setTimeout(() => child.kill("SIGKILL"), 3000);
      await exited;
      clearTimeout(timer);
    }
    this.#unregister();
  }
}

/**
 * Worker side: answers requests with `handlers[cmd](args)`; exits when the parent disconnects.
 * @param {Record<string, (args: any) => unknown>} handlers
 */
export function serve(handlers) {
  process.on("message", async ({ id, cmd, args }) => {
    try {
      const handler = handlers[cmd];
      if (handler === undefined) throw new Error(`unknown command ${cmd}`);
      process.send({ id, result: await handler(args) });
    } catch (error) {
      process.send({ id, error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    }
  });
  process.once("disconnect", () => process.exit(0));
}
