#!/usr/bin/env node
// The `globallock` command (package.json "bin"; `npm run build` copies this file to
// dist/cli/globallock.cjs). It runs the bundled command, main.cjs beside it, with the V8 code cache
// the build made for it (main.cjs.cache): bytecode for the functions a run uses, so that V8 does
// not parse and compile them again at every start (measured in bench/cli-startup.mjs). V8 checks
// the cache against the running Node.js (its V8 version and flags) and against the source, and
// compiles the bundle as `require` would where it rejects it. A cache older than the bundle (the
// bundle was changed after the build) is not read. Required rather than run (by
// scripts/cli-code-cache.cjs, which makes the cache), it exports `compileBundle`, so that the
// cache is made from exactly the source this loader compiles.
"use strict";
const { readFileSync, statSync } = require("node:fs");
const { createRequire } = require("node:module");
const { dirname, join } = require("node:path");
const { Script } = require("node:vm");

/**
 * The bundle at `bundle` compiled as the loader runs it (inside the function wrapper `require`
 * puts around a CommonJS module, on its first line), with `cachedData` if given; `run()` runs it.
 */
function compileBundle(bundle, cachedData) {
  const source = readFileSync(bundle, "utf8");
  const wrapper = `(function (exports, require, module, __filename, __dirname) {${source}\n})`;
  const script = new Script(wrapper, { filename: bundle, cachedData });
  const run = () => {
    const bundleModule = { exports: {}, filename: bundle, id: bundle };
    script.runInThisContext()(bundleModule.exports, createRequire(bundle), bundleModule, bundle, dirname(bundle));
  };
  return { script, run };
}

if (require.main === module) {
  const bundle = join(__dirname, "main.cjs");
  const cache = join(__dirname, "main.cjs.cache");
  let cachedData;
  try {
    if (statSync(cache).mtimeMs >= statSync(bundle).mtimeMs) cachedData = readFileSync(cache);
  } catch {
    // No cache: compile.
  }
  compileBundle(bundle, cachedData).run();
} else {
  module.exports = { compileBundle };
}
