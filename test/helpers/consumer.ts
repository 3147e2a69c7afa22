/**
 * A consumer of the built package (dist/ is built by `npm test` before vitest runs), in a temporary
 * directory that has only some of the installed packages.
 */
import { execFile } from "node:child_process";
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);
const root = resolve(import.meta.dirname, "../..");

/**
 * A temporary directory (the caller removes it) whose node_modules links every installed package
 * except `missing`, and holds a copy of this package's package.json and dist/ as "globallock" (a
 * copy, not a link: its imports resolve from the consumer's packages, not from this repository's).
 */
export function consumerDirectory(missing: readonly string[]): string {
  const dir = mkdtempSync(join(tmpdir(), "globallock-consumer-"));
  mkdirSync(join(dir, "node_modules"));
  for (const entry of readdirSync(join(root, "node_modules"))) {
    if (!entry.startsWith(".") && !missing.includes(entry)) {
      symlinkSync(join(root, "node_modules", entry), join(dir, "node_modules", entry));
    }
  }
  const installed = join(dir, "node_modules", "globallock");
  mkdirSync(installed);
  copyFileSync(join(root, "package.json"), join(installed, "package.json"));
  cpSync(join(root, "dist"), join(installed, "dist"), { recursive: true });
  return dir;
}

/**
 * Type-checks `source` (as an ES module and as CommonJS) in a directory that sees every installed
 * package except `missing` (and redlock, whose types never reach the declarations), plus a copy of
 * this package's package.json and dist/ as "globallock" (a copy, not a link: its declarations must
 * resolve their imports from the consumer's packages, not from this repository's); rejects with
 * the compiler's output. Then loads both builds there at run time.
 */
export async function typeCheckConsumer(source: string, missing: readonly string[]): Promise<void> {
  const dir = consumerDirectory(["redlock", ...missing]);
  try {
    writeFileSync(join(dir, "consumer.mts"), source);
    writeFileSync(join(dir, "consumer.cts"), source);
    const tsc = join(root, "node_modules/typescript/bin/tsc");
    const flags = [
      "--noEmit",
      "--strict",
      "--exactOptionalPropertyTypes",
      "--skipLibCheck",
      "false",
      "--types",
      "node",
    ];
    const resolution = ["--module", "nodenext", "--moduleResolution", "nodenext"];
    await run(process.execPath, [tsc, ...flags, ...resolution, "consumer.mts", "consumer.cts"], { cwd: dir }).catch(
      (error: { stdout: string }) => {
        throw new Error(error.stdout);
      },
    );
    // And both builds load without the missing packages (nor redlock, an optional peer).
    const load = `require("globallock").RedisLocker; import("globallock").then((m) => m.RedisLocker)`;
    await run(process.execPath, ["-e", load], { cwd: dir });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
