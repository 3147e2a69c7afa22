/**
 * `globallock status --key NAME`: who holds the key (owner, mode, time left, fencing token) and how
 * many wait for it, as the store's `inspect` tells (see `holders.ts` for the JSON).
 */

import { EXIT } from "./exit-codes.js";
import { describeHolder, lockInfoJson } from "./holders.js";
import type { StatusCommand } from "./invocation.js";
import type { Reporter } from "./reporter.js";
import { type Stdout, withStore } from "./store-command.js";

/** Prints the key's state on stdout (one JSON object with `--json`); resolves to the exit status. */
export function statusCommand(cmd: StatusCommand, reporter: Reporter, stdout: Stdout): Promise<number> {
  return withStore(cmd.store, cmd.key, reporter, async (store) => {
    const info = await store.locker.inspect(undefined, cmd.key);
    const held = info.holders.length > 0;
    if (cmd.json) {
      stdout.write(`${JSON.stringify({ key: cmd.key, store: store.label, ...lockInfoJson(info) })}\n`);
    } else {
      const waiting = info.waiting > 0 ? `; ${info.waiting} waiting` : "";
      const [first] = info.holders;
      if (!held) stdout.write(`${cmd.key}: free (${store.label})${waiting}\n`);
      else if (info.holders.length === 1 && first !== undefined) {
        stdout.write(`${cmd.key}: held by ${describeHolder(first)} (${store.label})${waiting}\n`);
      } else {
        const lines = info.holders.map((holder) => `  ${describeHolder(holder)}\n`).join("");
        stdout.write(`${cmd.key}: held by ${info.holders.length} holders (${store.label})${waiting}\n${lines}`);
      }
    }
    return held ? 0 : EXIT.FREE;
  });
}
