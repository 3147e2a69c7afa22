#!/usr/bin/env node
import { main } from "./cli.js";
/** The `globallock` executable (package.json `bin`): runs {@link main} and exits with its status. */
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
