#!/usr/bin/env node
/** The `globallock` executable (package.json `bin`): runs `main` (cli.ts) and exits with its status. */
import { EXIT } from "./exit-codes.js";
import { REAPER_COMMAND, reap } from "./tether.js";

const argv = process.argv.slice(2);
// The reaper of a `run` (see tether.ts) loads nothing else: it idles beside every command.
const done =
  argv[0] === REAPER_COMMAND ? reap(argv[1] ?? "").then(() => 0) : import("./cli.js").then(({ main }) => main(argv));
done.then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(
      `globallock: internal error: ${error instanceof Error ? (error.stack ?? error.message) : error}\n`,
    );
    process.exit(EXIT.INTERNAL);
  },
);
