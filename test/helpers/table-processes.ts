/**
 * Table lockers in child processes (table-child.mjs). The table lockers are not exported by the
 * built package yet, so the child is bundled from the sources with esbuild, into a cache folder
 * under node_modules (where the child resolves `pg`, `mysql2` and `better-sqlite3` as the package
 * would); the bundle is removed by {@link removeChildBundle}.
 */
import { type ChildProcess, fork } from "node:child_process";
import { mkdirSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { build } from "esbuild";
import type { TableLockerOptions } from "../../src/table/options.js";
import type { TableTarget } from "./table-harness.js";

const SOURCE = resolve(import.meta.dirname, "table-child.mjs");
const BUNDLE = resolve(
  import.meta.dirname,
  "../../node_modules/.cache/globallock-table-tests",
  `child-${process.pid}.mjs`,
);

let bundling: Promise<string> | undefined;

/** The child's bundle (made once per test process). */
function childBundle(): Promise<string> {
  bundling ??= (async () => {
    mkdirSync(join(BUNDLE, ".."), { recursive: true });
    await build({
      entryPoints: [SOURCE],
      outfile: BUNDLE,
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      packages: "external",
      logLevel: "warning",
    });
    return BUNDLE;
  })();
  return bundling;
}

/** Removes the child's bundle (call in `afterAll`). */
export function removeChildBundle(): void {
  bundling = undefined;
  rmSync(BUNDLE, { force: true });
}

/** What a child answers. */
interface Reply {
  readonly ready?: boolean;
  readonly ok?: boolean;
  readonly fencingToken?: string;
  readonly error?: string;
}

/** One child process with one table locker on `target`. */
export class TableChild {
  readonly process: ChildProcess;
  readonly exited: Promise<void>;
  readonly #replies: Reply[] = [];
  #waiting: ((reply: Reply) => void) | undefined;

  private constructor(bundle: string, target: TableTarget, options: TableLockerOptions) {
    this.process = fork(bundle, [JSON.stringify({ target, options })], {
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    this.exited = new Promise((done) => this.process.once("exit", () => done()));
    this.process.on("message", (reply: Reply) => {
      const waiting = this.#waiting;
      this.#waiting = undefined;
      if (waiting !== undefined) waiting(reply);
      else this.#replies.push(reply);
    });
  }

  /** Starts a child and waits until its locker is made. */
  static async start(target: TableTarget, options: TableLockerOptions): Promise<TableChild> {
    const child = new TableChild(await childBundle(), target, options);
    const ready = await child.#next();
    if (ready.ready !== true) throw new Error(`the child did not start: ${JSON.stringify(ready)}`);
    return child;
  }

  /** The child's next reply (a child that exits first rejects). */
  #next(): Promise<Reply> {
    const queued = this.#replies.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    return new Promise((done, fail) => {
      this.#waiting = done;
      void this.exited.then(() => fail(new Error("the child exited without answering")));
    });
  }

  /** Sends `message` and waits for the answer; a failure the child reports rejects. */
  async ask(message: Record<string, unknown>): Promise<Reply> {
    this.process.send(message);
    const reply = await this.#next();
    if (reply.ok !== true) throw new Error(`the child failed: ${reply.error ?? JSON.stringify(reply)}`);
    return reply;
  }

  /** Kills the child (SIGKILL: no release, no clean-up) and waits for it to exit. */
  async kill(): Promise<void> {
    this.process.kill("SIGKILL");
    await this.exited;
  }
}
