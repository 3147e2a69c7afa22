/**
 * The `globallock` command: `globallock run [options] -- command [args...]` and
 * `globallock status --key NAME`, `globallock list`, `globallock doctor` (see {@link HELP}). The bin entry is `main.ts`.
 */
import { readFileSync, realpathSync } from "node:fs";
import { dirname, join } from "node:path";
import { parseCommandLine } from "./args.js";
import { doctorCommand } from "./doctor.js";
import { EXIT } from "./exit-codes.js";
import { listCommand } from "./list.js";
import { Reporter } from "./reporter.js";
import { runCommand } from "./run.js";
import { statusCommand } from "./status.js";
import { HELP, UsageError, usageMessage } from "./usage.js";

/** Runs the command line `argv` (without node and the script); resolves to the exit status. */
export async function main(argv: readonly string[]): Promise<number> {
  let invocation: ReturnType<typeof parseCommandLine>;
  try {
    invocation = parseCommandLine(argv, process.env);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    const { text, code } = usageMessage(error);
    process.stderr.write(text);
    return code;
  }
  switch (invocation.command) {
    case "help":
      process.stdout.write(HELP);
      return 0;
    case "version":
      process.stdout.write(`${packageVersion()}\n`);
      return 0;
    case "run":
      return runCommand(invocation, new Reporter(invocation.json, process.stderr));
    case "status":
      return statusCommand(invocation, new Reporter(invocation.json, process.stderr), process.stdout);
    case "doctor":
      return doctorCommand(invocation, new Reporter(invocation.json, process.stderr), process.stdout);
    case "list":
      return listCommand(invocation, new Reporter(invocation.json, process.stderr), process.stdout);
  }
}

/** The version in the nearest package.json named globallock above the running script. */
function packageVersion(): string {
  let dir = dirname(realpathSync(process.argv[1] ?? "."));
  for (let depth = 0; depth < 8; depth++) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name?: string; version?: string };
      if (pkg.name === "globallock" && pkg.version !== undefined) return pkg.version;
    } catch {
      // Not here: keep walking up.
    }
    dir = dirname(dir);
  }
  return "unknown";
}

export { EXIT };
