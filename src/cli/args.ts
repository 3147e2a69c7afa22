/**
 * The command line of `globallock`, parsed with `node:util` `parseArgs`: which command, its
 * options and its key (see `invocation.ts`). Every mistake is a {@link UsageError} that names the
 * bad value (the values' own checks are in `option-values.ts`, the help text in `usage.ts`).
 */
import { type ParseArgsConfig, parseArgs } from "node:util";
import type { Invocation } from "./invocation.js";
import {
  exitCodeOf,
  expiryOf,
  keyOf,
  limitOf,
  listLimitOf,
  maxHoldOf,
  optionalDuration,
  ownerOf,
  storeOf,
} from "./option-values.js";
import { UsageError } from "./usage.js";

const STORE_OPTIONS = {
  redis: { type: "string", multiple: true },
  dir: { type: "string" },
  json: { type: "boolean" },
  key: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

const RUN_OPTIONS = {
  ...STORE_OPTIONS,
  wait: { type: "string", short: "w" },
  "no-wait": { type: "boolean", short: "n" },
  "conflict-exit-code": { type: "string", short: "E" },
  shared: { type: "boolean", short: "s" },
  exclusive: { type: "boolean", short: "x" },
  command: { type: "string", short: "c" },
  expiry: { type: "string" },
  "fencing-env": { type: "string" },
  "on-lost": { type: "string" },
  "kill-after": { type: "string" },
  owner: { type: "string" },
  "max-hold": { type: "string" },
  limit: { type: "string" },
} as const;

/**
 * Parses `argv` (without the node and script paths). `env` supplies `GLOBALLOCK_REDIS_URL` and
 * `GLOBALLOCK_DIR`. Throws {@link UsageError}.
 */
export function parseCommandLine(argv: readonly string[], env: NodeJS.ProcessEnv): Invocation {
  const [first, ...rest] = argv;
  if (first === undefined) throw new UsageError("no command given");
  if (first === "-h" || first === "--help" || first === "help") return { command: "help" };
  if (first === "-v" || first === "--version") return { command: "version" };
  if (first === "run") return parseRun(rest, env);
  if (first === "status") return parseStatus(rest, env);
  if (first === "doctor") return parseDoctor(rest, env);
  if (first === "list") return parseList(rest, env);
  throw new UsageError(`unknown command ${JSON.stringify(first)} (expected run, status, list or doctor)`);
}

/** The options of `options` that take a value: their long names, and their one-letter names. */
function valued(options: Readonly<Record<string, { type: string; short?: string }>>): {
  long: Set<string>;
  short: Set<string>;
} {
  const entries = Object.entries(options).filter(([, option]) => option.type === "string");
  return {
    long: new Set(entries.map(([name]) => name)),
    short: new Set(entries.flatMap(([, option]) => (option.short === undefined ? [] : [option.short]))),
  };
}

const RUN_VALUED = valued(RUN_OPTIONS);

/**
 * Where the options of `argv` end, as getopt's `+` mode has it (flock(1)'s): the index of the first
 * argument that is neither an option nor an option's value, or of `--`, or `argv.length`. A
 * one-letter option that takes a value takes the rest of its cluster (`-w5`) or the next argument.
 */
function endOfOptions(argv: readonly string[], takesValue: { long: Set<string>; short: Set<string> }): number {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === "--") return i;
    if (arg.startsWith("--")) {
      if (!arg.includes("=") && takesValue.long.has(arg.slice(2))) i++;
    } else if (arg.startsWith("-") && arg.length > 1) {
      const at = Array.from(arg.slice(1)).findIndex((letter) => takesValue.short.has(letter));
      if (at === arg.length - 2) i++;
    } else return i;
  }
  return argv.length;
}

/**
 * `run [options] KEY command [args...]`, `run [options] KEY -c 'command'`, and with `--key KEY`
 * the command after the options (or after `--`).
 */
function parseRun(argv: readonly string[], env: NodeJS.ProcessEnv): Invocation {
  const end = endOfOptions(argv, RUN_VALUED);
  const { values } = parsed(argv.slice(0, end), RUN_OPTIONS, false);
  if (values.help) return { command: "help", topic: "run" };
  let rest = argv.slice(end);
  let key = values.key;
  let shell = values.command;
  if (rest[0] === "--") rest = rest.slice(1);
  else {
    if (key === undefined && rest.length > 0) [key, ...rest] = rest as [string, ...string[]];
    if (rest[0] === "-c" || rest[0] === "--command") {
      // flock(1)'s `file -c command`.
      if (shell !== undefined) throw new UsageError("-c given twice");
      if (rest.length !== 2)
        throw new UsageError("-c takes one shell command: globallock run [options] KEY -c 'command'");
      shell = rest[1];
      rest = [];
    } else if (rest[0] === "--") rest = rest.slice(1);
  }
  let command = rest;
  if (shell !== undefined) {
    if (command.length > 0) throw new UsageError("give either -c COMMAND or a command, not both");
    if (shell === "") throw new UsageError('-c: expected a shell command, received ""');
    command = ["sh", "-c", shell];
  }
  const checkedKey = keyOf(key);
  const [program, ...args] = command;
  if (program === undefined || program === "") {
    throw new UsageError("no command to run (globallock run [options] KEY command [args...])");
  }
  if (values.wait !== undefined && values["no-wait"]) throw new UsageError("give either --wait or --no-wait");
  if (values.shared && values.exclusive) throw new UsageError("give either --shared or --exclusive");
  const onLost = values["on-lost"] ?? "warn";
  if (onLost !== "warn" && onLost !== "kill") {
    throw new UsageError(`--on-lost: expected warn or kill, received ${JSON.stringify(onLost)}`);
  }
  const fencingEnv = values["fencing-env"];
  if (fencingEnv !== undefined && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(fencingEnv)) {
    throw new UsageError(
      `--fencing-env: expected an environment variable name, received ${JSON.stringify(fencingEnv)}`,
    );
  }
  const store = storeOf(values, env);
  const shared = values.shared === true;
  if (shared && store.kind === "redis" && store.urls.length > 1) {
    throw new UsageError("--shared needs one Redis server (a Redlock quorum has no shared locks)");
  }
  const limit = limitOf(values.limit);
  if (limit !== undefined) {
    if (shared) throw new UsageError("give either --limit or --shared: --limit counts runs, it takes no shared lock");
    if (store.kind === "redis" && store.urls.length > 1) {
      throw new UsageError("--limit needs the file store or one Redis server (a Redlock quorum cannot count runs)");
    }
    if (fencingEnv !== undefined && limit > 1) {
      throw new UsageError("--fencing-env needs an exclusive lock: not with --limit above 1 (runs share the key)");
    }
  }
  return {
    command: "run",
    store,
    key: checkedKey,
    shared,
    waitMs: values["no-wait"] ? 0 : optionalDuration("--wait", values.wait),
    conflictExitCode: exitCodeOf(values["conflict-exit-code"]),
    expiryMs: expiryOf(values.expiry),
    fencingEnv,
    onLost,
    killAfterMs: optionalDuration("--kill-after", values["kill-after"]) ?? 10_000,
    owner: ownerOf(values.owner),
    maxHoldMs: maxHoldOf(values["max-hold"]),
    limit,
    json: values.json === true,
    argv: [program, ...args],
  };
}

/** `status [options] KEY`, or `status --key KEY [options]`. */
function parseStatus(argv: readonly string[], env: NodeJS.ProcessEnv): Invocation {
  const { values, positionals } = parsed([...argv], STORE_OPTIONS, true);
  if (values.help) return { command: "help", topic: "status" };
  const [key, extra] = values.key === undefined ? positionals : [values.key, ...positionals];
  if (extra !== undefined) throw new UsageError(`unexpected argument ${JSON.stringify(extra)}`);
  return { command: "status", store: storeOf(values, env), key: keyOf(key), json: values.json === true };
}

/** `doctor [store options] [--json]`. */
function parseDoctor(argv: readonly string[], env: NodeJS.ProcessEnv): Invocation {
  const { values, positionals } = parsed([...argv], STORE_OPTIONS, true);
  if (values.help) return { command: "help", topic: "doctor" };
  if (values.key !== undefined) throw new UsageError("doctor checks the store, not a key: drop --key");
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(positionals[0])}`);
  return { command: "doctor", store: storeOf(values, env), json: values.json === true };
}

const LIST_OPTIONS = {
  ...STORE_OPTIONS,
  prefix: { type: "string" },
  limit: { type: "string" },
} as const;

/** `list [store options] [--prefix P] [--limit N] [--json]`. */
function parseList(argv: readonly string[], env: NodeJS.ProcessEnv): Invocation {
  const { values, positionals } = parsed([...argv], LIST_OPTIONS, true);
  if (values.help) return { command: "help", topic: "list" };
  if (values.key !== undefined) throw new UsageError("list shows every key: drop --key (--prefix narrows it)");
  if (positionals.length > 0) {
    throw new UsageError(`unexpected argument ${JSON.stringify(positionals[0])} (--prefix narrows the list)`);
  }
  const limit = listLimitOf(values.limit);
  return {
    command: "list",
    store: storeOf(values, env),
    prefix: values.prefix ?? "",
    limit,
    json: values.json === true,
  };
}

/** `args` parsed (strictly) for `options`; parseArgs's errors (unknown option, missing value…) become usage errors. */
function parsed<const O extends NonNullable<ParseArgsConfig["options"]>>(
  args: string[],
  options: O,
  allowPositionals: boolean,
) {
  try {
    return parseArgs({ args, options, allowPositionals, strict: true });
  } catch (error) {
    throw new UsageError((error as Error).message.replace(/\. To specify a positional.*$/s, ""));
  }
}
