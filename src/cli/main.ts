#!/usr/bin/env node
/** The `globallock` executable (package.json `bin`): runs {@link main} and exits with its status. */
import { main } from "./cli.js";
import { EXIT } from "./exit-codes.js";
import { REAPER_COMMAND, reap } from "./tether.js";

const argv = process.argv.slice(2);
const done = argv[0] === REAPER_COMMAND ? reap(argv[1] ?? "").then(() => 0) : main(argv);
done.then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(
      `globallock: internal error: ${error instanceof Error ? (error.stack ?? error.message) : error}\n`,
    );
    process.exit(EXIT.INTERNAL);
  },
);
