/**
 * Why FileLocker does not use proper-lockfile (4.1.2): its take-over of a stale lock is not
 * atomic. Two processes that find the same stale lock at the same moment can both take it: each
 * checks the lock directory's mtime, removes the directory and makes it again, and one contender's
 * removal can delete the lock the other has just made. Run: `node torture/repro/proper-lockfile-stale-race.mjs`.
 *
 * The parent makes `ROUNDS` stale locks (`<key>.lock` directories with an mtime a minute old) and
 * forks two contenders that, at the same epoch instants (busy-waiting for them), call
 * `lockfile.lock(<key>, { stale: 5000 })` and hold what they got for 10 ms. It prints the rounds in
 * which both held the lock at once (seen on this repository's 2-CPU VM: 16 and 1 of 200 in two runs);
 * scenario 20 (file-stale-race) runs the same race against FileLocker: exactly one winner, always.
 */
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, utimesSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import lockfile from "proper-lockfile";

const ROUNDS = 200;
const HOLD_MS = 10;
const epoch = () => performance.timeOrigin + performance.now();

if (process.argv[2] === "contender") {
  const [directory, start] = [process.argv[3], Number(process.argv[4])];
  const held = [];
  for (let round = 0; round < ROUNDS; round++) {
    const at = start + round * 25;
    while (epoch() < at) {
      // busy-wait: both contenders attempt at the same instant
    }
    const options = { realpath: false, stale: 5000, onCompromised: () => undefined };
    const release = await lockfile.lock(join(directory, `k${round}`), options).catch(() => undefined);
    if (release === undefined) continue;
    const from = epoch();
    await new Promise((resolve) => setTimeout(resolve, HOLD_MS));
    held.push([round, from, epoch()]);
    await release().catch(() => undefined);
  }
  process.stdout.write(JSON.stringify(held));
} else {
  const directory = mkdtempSync(join(tmpdir(), "proper-lockfile-race-"));
  const aMinuteAgo = (Date.now() - 60_000) / 1000;
  for (let round = 0; round < ROUNDS; round++) {
    mkdirSync(join(directory, `k${round}.lock`));
    utimesSync(join(directory, `k${round}.lock`), aMinuteAgo, aMinuteAgo);
  }
  const start = String(epoch() + 500);
  const self = fileURLToPath(import.meta.url);
  const run = promisify(execFile);
  const [a, b] = await Promise.all(
    [0, 1].map(async () => JSON.parse((await run(process.execPath, [self, "contender", directory, start])).stdout)),
  );
  const both = a.filter(([round, from, to]) => b.some(([r, f, t]) => r === round && f < to && from < t));
  console.log(
    `proper-lockfile ${lockfileVersion()}: ${both.length} of ${ROUNDS} stale locks held by both contenders at once`,
  );
  rmSync(directory, { recursive: true, force: true });
}
