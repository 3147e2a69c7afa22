/** `globallock status --key NAME`: whether the key is held, by whom as far as the store knows. */
import type { StatusCommand } from "./args.js";
import { EXIT } from "./exit-codes.js";
import { describeHolder, type Reporter } from "./reporter.js";
import { failure } from "./run.js";
import { type OpenStore, openStore } from "./store.js";

/** Prints the key's state on stdout (one JSON object with `--json`); resolves to the exit status. */
export async function statusCommand(cmd: StatusCommand, reporter: Reporter, stdout: { write(text: string): unknown }) {
  let store: OpenStore | undefined;
  try {
    store = await openStore(cmd.store, undefined, false);
    const holder = await store.holder(cmd.key);
    if (cmd.json) stdout.write(`${JSON.stringify({ key: cmd.key, store: store.label, ...holder })}\n`);
    else if (holder.held) stdout.write(`${cmd.key}: held by ${describeHolder(holder)} (${store.label})\n`);
    else stdout.write(`${cmd.key}: free (${store.label})\n`);
    return holder.held ? 0 : EXIT.FREE;
  } catch (error) {
    return failure(error, cmd, reporter);
  } finally {
    await store?.close().catch(() => undefined);
  }
}
