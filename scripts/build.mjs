// Builds dist/esm (ES modules) and dist/cjs (CommonJS), each with its own .d.ts files, using the
// TypeScript compiler. dist/cjs gets a package.json that marks it CommonJS. Then the `globallock`
// command (package.json "bin", dist/cli/globallock.cjs) is bundled into one file (esbuild), so
// that its start loads one module instead of ~50 (see bench/cli-startup.mjs).
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { build } from "esbuild";

const require = createRequire(import.meta.url);
const tsc = require.resolve("typescript/bin/tsc");

rmSync("dist", { recursive: true, force: true });
execFileSync(process.execPath, [tsc, "-p", "tsconfig.build.json"], { stdio: "inherit" });
// The same sources, checked by the build above: emitted without a second check (--noCheck; the
// output is byte for byte what a checked build writes, measured 4.3 s against 7.4 s).
execFileSync(process.execPath, [tsc, "-p", "tsconfig.cjs.json", "--noCheck"], { stdio: "inherit" });
mkdirSync("dist/cjs", { recursive: true });
writeFileSync("dist/cjs/package.json", `${JSON.stringify({ type: "commonjs" }, null, 2)}\n`);
writeFileSync("dist/esm/package.json", `${JSON.stringify({ type: "module" }, null, 2)}\n`);

// The command in one CommonJS file, dist/cli/main.cjs: the store modules it imports on demand
// (`import("./redis-store.js")`) are inlined behind lazy initialisers, so their code runs only for
// the store chosen; packages (ioredis, redlock, …: optional peers) become `require`s (no dynamic
// `import()` is left: the loader runs the bundle as a vm.Script, which has no module loader),
// made only where the store needs them. tsc has type-checked the sources above; esbuild only
// strips the types. CommonJS, not an ES module: Node.js starts a CommonJS main module without
// loading its ES module loader. Whitespace and syntax minified (names kept): less to parse when
// the code cache is rejected. The bin is the loader (scripts/cli-loader.cjs), which runs the bundle
// with the V8 code cache made next (scripts/cli-code-cache.cjs). Each step is measured in
// bench/cli-startup.mjs (docs/benchmarks.md).
await build({
  entryPoints: ["src/cli/main.ts"],
  outfile: "dist/cli/main.cjs",
  bundle: true,
  platform: "node",
  format: "cjs",
  supported: { "dynamic-import": false },
  minifyWhitespace: true,
  minifySyntax: true,
  target: "node20",
  packages: "external",
  legalComments: "none",
  logLevel: "warning",
});
// The entry's shebang line would be a syntax error inside the loader's function wrapper.
const bundled = readFileSync("dist/cli/main.cjs", "utf8");
writeFileSync("dist/cli/main.cjs", bundled.startsWith("#!") ? bundled.slice(bundled.indexOf("\n") + 1) : bundled);
copyFileSync("scripts/cli-loader.cjs", "dist/cli/globallock.cjs");
try {
  execFileSync(process.execPath, ["scripts/cli-code-cache.cjs"], { stdio: "inherit" });
} catch (error) {
  // The command works without it (compiled at each start, as `require` would).
  console.warn(`build: no code cache for the globallock command (${error.message})`);
}
