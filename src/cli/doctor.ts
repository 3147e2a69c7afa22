/**
 * `globallock doctor`: what `checkDeployment` finds about the store the other commands would use
 * (the same store options), printed readably or as one JSON object. Exit status: 0 nothing to
 * fix, 1 warnings, 2 errors; 69 when the store cannot even be opened.
 */
import { checkDeployment } from "../deployment/check-deployment.js";
import type { Finding } from "../deployment/finding.js";
import type { DoctorCommand } from "./invocation.js";
import type { Reporter } from "./reporter.js";
import { type Stdout, withStore } from "./store-command.js";

/** The exit status for `found`: 2 with an error, 1 with a warning, else 0. */
export function doctorExitCode(found: readonly Finding[]): number {
  if (found.some((item) => item.level === "error")) return 2;
  return found.some((item) => item.level === "warning") ? 1 : 0;
}

/** One finding as text: its level and code, the message, and the fix indented below. */
function describe(item: Finding): string {
  const fix = item.fix === undefined ? "" : `\n    fix: ${item.fix}`;
  return `${item.level.toUpperCase()} ${item.code}: ${item.message}${fix}\n`;
}

/** Prints the findings on stdout; resolves to the exit status. */
export function doctorCommand(cmd: DoctorCommand, reporter: Reporter, stdout: Stdout): Promise<number> {
  return withStore(cmd.store, "", reporter, async (store) => {
    const found = await checkDeployment(store.locker);
    if (cmd.json) stdout.write(`${JSON.stringify({ store: store.label, findings: found })}\n`);
    else if (found.length === 0) stdout.write(`${store.label}: nothing to report\n`);
    else stdout.write(`${store.label}:\n${found.map(describe).join("")}`);
    return doctorExitCode(found);
  });
}
