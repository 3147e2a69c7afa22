// After the build: makes the `globallock` command (package.json "bin") executable and checks that
// it starts with its shebang, so that `npm run build` output runs as `./dist/cli/globallock.cjs`.
import { chmodSync, readFileSync } from "node:fs";

const pkg = JSON.parse(readFileSync("package.json", "utf8"));
for (const file of Object.values(pkg.bin ?? {})) {
  if (!readFileSync(file, "utf8").startsWith("#!/usr/bin/env node\n")) {
    throw new Error(`${file}: the bin entry must start with "#!/usr/bin/env node"`);
  }
  chmodSync(file, 0o755);
}
