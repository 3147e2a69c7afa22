// Builds dist/esm (ES modules) and dist/cjs (CommonJS), each with its own .d.ts files, using the
// TypeScript compiler. dist/cjs gets a package.json that marks it CommonJS. Then the `globallock`
// command (package.json "bin", dist/esm/cli/main.js) is replaced by one bundled file (esbuild), so
// that its start loads one module instead of ~50 (see bench/cli-startup.mjs).
import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { build } from "esbuild";

const require = createRequire(import.meta.url);
const tsc = require.resolve("typescript/bin/tsc");

rmSync("dist", { recursive: true, force: true });
execFileSync(process.execPath, [tsc, "-p", "tsconfig.build.json"], { stdio: "inherit" });
execFileSync(process.execPath, [tsc, "-p", "tsconfig.cjs.json"], { stdio: "inherit" });
mkdirSync("dist/cjs", { recursive: true });
writeFileSync("dist/cjs/package.json", `${JSON.stringify({ type: "commonjs" }, null, 2)}\n`);
writeFileSync("dist/esm/package.json", `${JSON.stringify({ type: "module" }, null, 2)}\n`);

// The command in one ES module: the store modules it imports on demand (`import("./redis-store.js")`)
// are inlined behind lazy initialisers, so their code runs only for the store chosen; packages
// (ioredis, redlock, …: optional peers) stay imports, made only where the store needs them. tsc has
// type-checked the sources above; esbuild only strips the types. The entry's shebang is kept.
await build({
  entryPoints: ["src/cli/main.ts"],
  outfile: "dist/esm/cli/main.js",
  allowOverwrite: true,
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  packages: "external",
  legalComments: "none",
  logLevel: "warning",
});
