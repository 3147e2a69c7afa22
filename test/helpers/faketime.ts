/**
 * Wall-clock steps for child processes, with Debian's libfaketime (package `faketime`, installed by
 * `.ci/run`): the child's `CLOCK_REALTIME` (Date.now) is offset by what a file says, read on every
 * clock call, so the parent steps it at any moment; `CLOCK_MONOTONIC` is left alone
 * (`FAKETIME_DONT_FAKE_MONOTONIC=1`), as an NTP step leaves it.
 */
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** Where Debian and Ubuntu put the library (first match wins); `FAKETIME_LIB` overrides. */
const CANDIDATES = [
  "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
  "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
  "/usr/lib/faketime/libfaketime.so.1",
  "/usr/local/lib/faketime/libfaketime.so.1",
];

/** The path of libfaketime, or `undefined` when it is not installed. */
export function findFaketime(): string | undefined {
  const given = process.env.FAKETIME_LIB;
  if (given !== undefined && given !== "") return existsSync(given) ? given : undefined;
  return CANDIDATES.find((path) => existsSync(path));
}

/** A wall clock of a child process that the parent steps. */
export class SteppedClock {
  /** The child's environment: pass it as the `env` of the spawn. */
  readonly env: NodeJS.ProcessEnv;
  readonly #file: string;

  /** @param directory where to keep the offset file. */
  constructor(directory: string, name: string) {
    const library = findFaketime();
    if (library === undefined) {
      throw new Error(
        "libfaketime is not installed: the wall-clock step tests need it. Install Debian's `faketime` " +
          "package (apt-get install faketime; .ci/run does) or set FAKETIME_LIB to libfaketime.so.1.",
      );
    }
    this.#file = join(directory, `faketime-${name}`);
    writeFileSync(this.#file, "+0");
    this.env = {
      ...process.env,
      LD_PRELOAD: library,
      FAKETIME_TIMESTAMP_FILE: this.#file,
      FAKETIME_NO_CACHE: "1",
      FAKETIME_DONT_FAKE_MONOTONIC: "1",
    };
  }

  /** Steps the child's wall clock to `offset` from the real time (`"-1h"`, `"+1h"`, `"+0"`). */
  step(offset: string): void {
    writeFileSync(this.#file, offset);
  }
}
