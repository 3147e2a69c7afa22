// Makes dist/cli/main.cjs.cache, the V8 code cache the `globallock` command starts with (see
// scripts/cli-loader.cjs): it compiles the bundle with the loader's own `compileBundle`, runs one
// `globallock run --dir <temp> --key build -- node -e 0` in this process, and writes the code of
// every function that run compiled, once the command is about to exit. Run by scripts/build.mjs
// with the Node.js that builds; the loader of another Node.js version finds the cache rejected by
// V8 and compiles the bundle instead.
"use strict";
const { mkdtempSync, rmSync, writeFileSync } = require("node:fs");
const { tmpdir } = require("node:os");
const { join, resolve } = require("node:path");
const { compileBundle } = require("../dist/cli/globallock.cjs");

const bundle = resolve("dist/cli/main.cjs");
const { script, run } = compileBundle(bundle, undefined);
const work = mkdtempSync(join(tmpdir(), "globallock-code-cache-"));
process.argv = [process.execPath, bundle, "run", "--dir", work, "--key", "build", "--", process.execPath, "-e", "0"];
const exit = process.exit.bind(process);
process.exit = (code) => {
  rmSync(work, { recursive: true, force: true });
  if (code !== 0) {
    process.stderr.write(`cli-code-cache: the command exited with ${code}; no cache written\n`);
    exit(1);
  }
  writeFileSync(`${bundle}.cache`, script.createCachedData());
  exit(0);
};
run();
