/**
 * `globallock list [--prefix P] [--limit N] [--json] [store options]`: every held key of the store
 * (the file store's or a Redis's) with its holders and waiters (`Locker.list` of the read-write
 * locker that `run` and `status` use), as a table that fits 80 columns or as one JSON object
 * (documented in docs/reference.md, "globallock list"). A store that cannot name its keys would be
 * an UnsupportedError: exit 64.
 */
import type { LockInfo } from "../locker.js";
import { lockInfoJson } from "./holders.js";
import type { ListCommand } from "./invocation.js";
import type { Reporter } from "./reporter.js";
import { type Stdout, withStore } from "./store-command.js";

/** Column widths: key, holder, mode, time left, waiting (with a space between: 79 columns). */
const WIDTHS = [31, 20, 9, 8, 7] as const;

/** Prints the held keys on stdout; resolves to the exit status (0, or the error's). */
export function listCommand(cmd: ListCommand, reporter: Reporter, stdout: Stdout): Promise<number> {
  return withStore(cmd.store, "", reporter, async (store) => {
    const options = cmd.limit === undefined ? { prefix: cmd.prefix } : { prefix: cmd.prefix, limit: cmd.limit };
    const infos = await store.locker.list(undefined, options);
    const limit = cmd.limit ?? 1000;
    const full = infos.length >= limit;
    if (cmd.json) {
      const locks = infos.map((info) => ({ key: info.key, ...lockInfoJson(info) }));
      stdout.write(`${JSON.stringify({ store: store.label, locks, limitReached: full })}\n`);
    } else if (infos.length === 0) {
      stdout.write(`no held locks${cmd.prefix === "" ? "" : ` under "${cmd.prefix}"`} (${store.label})\n`);
    } else {
      stdout.write(`${listTable(infos)}`);
      if (full) stdout.write(`(the first ${limit} found; more may be held: --limit or --prefix)\n`);
    }
    return 0;
  });
}

/** The table of `infos`: a header, then a line per key, every line at most 79 columns wide. */
export function listTable(infos: readonly LockInfo[]): string {
  const rows = [["KEY", "HOLDER", "MODE", "LEFT", "WAITING"]];
  for (const info of infos) {
    const [first] = info.holders;
    const holder =
      info.holders.length === 1 && first !== undefined ? first.owner || "(unknown)" : `${info.holders.length} holders`;
    const modes = new Set(info.holders.map((one) => one.mode));
    const mode = modes.size === 1 ? (first?.mode ?? "") : "mixed";
    const left = Math.min(...info.holders.map((one) => one.expiresInMs));
    rows.push([info.key, holder, mode, shortMs(left), String(info.waiting)]);
  }
  return rows
    .map((row) =>
      row
        .map((cell, index) => {
          const width = WIDTHS[index] as number;
          const fitted = cut(cell, width);
          return index === row.length - 1 ? fitted : fitted.padEnd(width + fitted.length - [...fitted].length);
        })
        .join(" ")
        .trimEnd(),
    )
    .map((line) => `${line}\n`)
    .join("");
}

/** `text` in at most `width` characters (code points): cut with "…" when longer; control characters shown as "?". */
function cut(text: string, width: number): string {
  const chars = [...text.replace(/\p{Cc}/gu, "?")];
  return chars.length <= width ? chars.join("") : `${chars.slice(0, width - 1).join("")}…`;
}

/** A time left in at most 8 characters: 850ms, 12.3s, 12m05s, 5h03m, or ∞ (held until released). */
export function shortMs(ms: number): string {
  if (!Number.isFinite(ms)) return "∞";
  const rounded = Math.max(0, Math.round(ms));
  if (rounded < 1000) return `${rounded}ms`;
  if (rounded < 60_000) return `${(rounded / 1000).toFixed(1)}s`;
  const minutes = Math.floor(rounded / 60_000);
  if (minutes < 60) return `${minutes}m${String(Math.floor((rounded % 60_000) / 1000)).padStart(2, "0")}s`;
  const hours = Math.floor(minutes / 60);
  return hours < 10_000 ? `${hours}h${String(minutes % 60).padStart(2, "0")}m` : `${hours}h`;
}
