/**
 * The parent's side of `file-peer.mjs` (scenarios 21 and 22): FileLocker processes on the run's
 * lock directory, each optionally with a wall clock that the parent steps (libfaketime: only
 * CLOCK_REALTIME, as an NTP step; the offset is re-read from a file on every clock call).
 */
import { fork } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { track } from "./cleanup.mjs";
import { within } from "./clock.mjs";

const PEER = fileURLToPath(new URL("../file-peer.mjs", import.meta.url));
const FAKETIME = [
  process.env.FAKETIME_LIB,
  "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
  "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
  "/usr/lib/faketime/libfaketime.so.1",
];

/** The path of libfaketime; throws, saying how to install it, when it is missing. */
export function faketimeLibrary() {
  const found = FAKETIME.find((path) => path !== undefined && path !== "" && existsSync(path));
  if (found === undefined) {
    throw new Error("libfaketime not found: install Debian's `faketime` package (.ci/run does) or set FAKETIME_LIB");
  }
  return found;
}

/** Ms on the boot's monotonic clock, as the peers report times. */
export function monotonic() {
  return Number(process.hrtime.bigint()) / 1e6;
}

/** One peer process; `clockFile`: its wall clock's offset file (stepped with {@link FilePeer.step}). */
export class FilePeer {
  /** Every message it sent, in order. */
  events = [];
  #listeners = new Set();

  constructor(id, clockFile) {
    this.id = id;
    this.clockFile = clockFile;
    const env =
      clockFile === undefined
        ? process.env
        : {
            ...process.env,
            LD_PRELOAD: faketimeLibrary(),
            FAKETIME_TIMESTAMP_FILE: clockFile,
            FAKETIME_NO_CACHE: "1",
            FAKETIME_DONT_FAKE_MONOTONIC: "1",
          };
    if (clockFile !== undefined) writeFileSync(clockFile, "+0");
    this.child = fork(PEER, [], { stdio: ["ignore", "ignore", "inherit", "ipc"], env });
    track(this.child);
    this.exited = new Promise((done) => this.child.once("exit", done));
    this.child.on("message", (message) => {
      this.events.push(message);
      for (const listener of [...this.#listeners]) listener(message);
    });
  }

  /** Starts a peer with a FileLocker of `options` on the run's directory (`clocks`: a folder for a stepped clock). */
  static async start(ctx, id, options, clocks) {
    const peer = new FilePeer(id, clocks === undefined ? undefined : join(clocks, `clock-${id}`));
    peer.send({
      type: "start",
      directory: ctx.fileDirectory,
      refereePort: ctx.refereeServer.port,
      namespace: ctx.namespace,
      id,
      ...options,
    });
    await peer.next((m) => m.type === "ready", 10_000, `${id} ready`);
    return peer;
  }

  send(message) {
    if (this.child.connected) this.child.send(message);
  }

  /** The first message from now on that satisfies `predicate` (or an earlier one with `earlier`). */
  next(predicate, ms, label, earlier = false) {
    const seen = earlier ? this.events.find(predicate) : undefined;
    if (seen !== undefined) return Promise.resolve(seen);
    let listener;
    const found = new Promise((resolve) => {
      listener = (message) => {
        if (predicate(message)) resolve(message);
      };
      this.#listeners.add(listener);
    });
    return within(found, ms, label).finally(() => this.#listeners.delete(listener));
  }

  /** Steps this peer's wall clock to `offset` from the real time ("-1h", "+1h"). */
  step(offset) {
    writeFileSync(this.clockFile, offset);
  }

  /** The peer's wall clock now. */
  async wallClock() {
    this.send({ type: "clock" });
    return (await this.next((m) => m.type === "clock", 10_000, `${this.id} clock`)).now;
  }

  /** Closes the peer's locker and lets it exit (or kills it after 10 s). */
  async stop() {
    this.send({ type: "stop" });
    await within(this.exited, 10_000, `${this.id} exit`).catch(() => this.child.kill("SIGKILL"));
  }
}
