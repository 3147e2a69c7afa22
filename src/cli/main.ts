#!/usr/bin/env node
/**
 * The `globallock` executable (package.json `bin`): runs `main` (cli.ts) and exits with its status.
 * `npm run build` bundles it, with everything it imports, into one file (scripts/build.mjs).
 */
import { main } from "./cli.js";
import { EXIT } from "./exit-codes.js";

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(
      `globallock: internal error: ${error instanceof Error ? (error.stack ?? error.message) : error}\n`,
    );
    process.exit(EXIT.INTERNAL);
  },
);
