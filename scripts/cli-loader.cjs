#!/usr/bin/env node
// The `globallock` command (package.json "bin"; `npm run build` copies this file to
// dist/cli/globallock.cjs). It runs the bundled command, main.cjs beside it, with the V8 code cache
// the build made for it (main.cjs.cache): bytecode for the functions a run uses, so that V8 does
// not parse and compile them again at every start (measured in bench/cli-startup.mjs). V8 checks
// the cache against the running Node.js (its V8 version and flags) and against the source, and
// compiles the bundle as `require` would where it rejects it. A cache older than the bundle (the
// bundle was changed after the build) is not read at all.
"use strict";
const { readFileSync, statSync } = require("node:fs");
const { createRequire } = require("node:module");
const { join } = require("node:path");
const { Script } = require("node:vm");

const bundle = join(__dirname, "main.cjs");
const cache = join(__dirname, "main.cjs.cache");
const source = readFileSync(bundle, "utf8");
let cachedData;
try {
  if (statSync(cache).mtimeMs >= statSync(bundle).mtimeMs) cachedData = readFileSync(cache);
} catch {
  // No cache: compile.
}
// The wrapper `require` puts around a CommonJS module, on the bundle's first line.
const wrapper = `(function (exports, require, module, __filename, __dirname) {${source}\n})`;
const script = new Script(wrapper, { filename: bundle, cachedData });
const bundleModule = { exports: {}, filename: bundle, id: bundle };
script.runInThisContext()(bundleModule.exports, createRequire(bundle), bundleModule, bundle, __dirname);
