/**
 * What `globallock` tells its user, on stderr: with `--json`, one JSON object per line per event
 * (`{"event": "...", "time": "<ISO 8601>", ...}`); otherwise short human messages, and, while
 * waiting on a terminal, one status line rewritten in place.
 */
/** Where the reporter writes (stderr; a stand-in in tests). */
export interface Output {
  write(text: string): unknown;
  readonly isTTY?: boolean | undefined;
  /** The terminal's width (stderr's `columns`), read at every redraw: the status line fits it. */
  readonly columns?: number | undefined;
}

/** Writes a `globallock` invocation's events and messages to stderr (see the module comment). */
export class Reporter {
  readonly #json: boolean;
  readonly #out: Output;
  #statusShown = false;

  constructor(json: boolean, out: Output) {
    this.#json = json;
    this.#out = out;
  }

  /** Whether human messages and the status line go to a terminal. */
  get interactive(): boolean {
    return !this.#json && this.#out.isTTY === true;
  }

  /** With `--json`: one line for `event`. */
  event(event: string, fields: Readonly<Record<string, unknown>> = {}): void {
    if (!this.#json) return;
    const line = JSON.stringify({ event, time: new Date().toISOString(), ...fields }, (_key, value: unknown) =>
      typeof value === "bigint" ? value.toString() : value,
    );
    this.#out.write(`${line}\n`);
  }

  /** Without `--json`: a message line (`globallock: …`). `onlyOnTerminal`: skipped elsewhere. */
  say(text: string, onlyOnTerminal = false): void {
    if (this.#json || (onlyOnTerminal && this.#out.isTTY !== true)) return;
    this.clearStatus();
    this.#out.write(`globallock: ${text}\n`);
  }

  /**
   * On a terminal, without `--json`: shows `text` as the one status line, replacing the last in
   * place. Cut to the terminal's width (less one column, so the cursor never wraps): a line that
   * wrapped would leave a line behind at every redraw.
   */
  status(text: string): void {
    if (!this.interactive) return;
    this.#out.write(`\r\x1b[2K${fitTo(text, this.#out.columns)}`);
    this.#statusShown = true;
  }

  /** Removes the status line, if shown. */
  clearStatus(): void {
    if (!this.#statusShown) return;
    this.#out.write("\r\x1b[2K");
    this.#statusShown = false;
  }
}

/** `text` cut to `columns - 1` characters (its last one an ellipsis); whole when the width is unknown. */
export function fitTo(text: string, columns: number | undefined): string {
  if (columns === undefined || !(columns > 1)) return text;
  const chars = Array.from(text);
  return chars.length < columns ? text : `${chars.slice(0, columns - 2).join("")}…`;
}

/** "1.2 s", "3 min 5 s", "250 ms". */
export function formatMs(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const minutes = Math.floor(ms / 60_000);
  return `${minutes} min ${Math.round((ms % 60_000) / 1000)} s`;
}
