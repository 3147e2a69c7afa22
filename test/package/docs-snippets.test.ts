/**
 * Every code block of README.md and docs/*.md is checked, so the docs cannot drift from the code:
 * `ts` blocks are type-checked against the sources (with test/helpers/doc-snippet-prelude.d.ts
 * standing in for imports and the application around them), and a `js` block whose first line
 * names an example file (`// examples/x.mjs`) must be a verbatim excerpt of that file, which
 * test/package/example.test.ts runs. Other languages (`sh`) are commands, not code.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = resolve(fileURLToPath(new URL("../..", import.meta.url)));
const DOCS = [
  "README.md",
  ...readdirSync(join(ROOT, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => `docs/${name}`),
];

interface Block {
  readonly doc: string;
  /** Line of the block's first code line in the doc (1-based). */
  readonly line: number;
  readonly lang: string;
  readonly code: string;
}

function blocksOf(doc: string): Block[] {
  const lines = readFileSync(join(ROOT, doc), "utf8").split("\n");
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\w*)\s*$/.exec(lines[i] ?? "");
    if (open === null) continue;
    const start = i + 1;
    let end = start;
    while (end < lines.length && !/^```\s*$/.test(lines[end] ?? "")) end++;
    blocks.push({ doc, line: start + 1, lang: open[1] ?? "", code: lines.slice(start, end).join("\n") });
    i = end;
  }
  return blocks;
}

const blocks = DOCS.flatMap(blocksOf);

describe("code blocks in README.md and docs/", () => {
  it("are all ts, js (an example excerpt), sh, or text (a diagram: nothing to run)", () => {
    const unchecked = blocks.filter((block) => !["ts", "js", "sh", "text"].includes(block.lang));
    expect(unchecked.map((block) => `${block.doc}:${block.line} (${block.lang || "no language"})`)).toEqual([]);
  });

  it("js blocks quote an example file verbatim", () => {
    for (const block of blocks.filter((b) => b.lang === "js")) {
      const [first, ...rest] = block.code.split("\n");
      const file = /^\/\/ (examples\/[\w-]+\.mjs)$/.exec(first ?? "")?.[1];
      expect(file, `${block.doc}:${block.line} must start with "// examples/<file>.mjs"`).toBeDefined();
      const source = readFileSync(join(ROOT, file as string), "utf8");
      expect(source.includes(rest.join("\n")), `${block.doc}:${block.line} is not an excerpt of ${file}`).toBe(true);
    }
  });

  it("ts blocks type-check against the sources", () => {
    const dir = join(ROOT, "node_modules", ".cache", "globallock-doc-snippets");
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const files = new Map<string, Block>();
    for (const block of blocks.filter((b) => b.lang === "ts")) {
      const name = `${block.doc.replace(/[^\w]/g, "_")}_L${block.line}.ts`;
      // Each block is its own module (top-level await allowed); its line numbers are kept.
      writeFileSync(join(dir, name), `${block.code}\nexport {};\n`);
      files.set(name, block);
    }
    writeFileSync(join(dir, "prelude.d.ts"), readFileSync(join(ROOT, "test/helpers/doc-snippet-prelude.d.ts")));
    writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module" }));
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          lib: ["ES2022", "ESNext.Disposable"],
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          noUncheckedIndexedAccess: true,
          exactOptionalPropertyTypes: true,
          noEmit: true,
          skipLibCheck: true,
          types: ["node"],
          typeRoots: [join(ROOT, "node_modules/@types")],
          paths: {
            globallock: [join(ROOT, "src/index.ts")],
            redlock: [join(ROOT, "node_modules/redlock/dist/index.d.ts")],
          },
        },
        files: ["prelude.d.ts", ...files.keys()],
      }),
    );
    const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
    let output = "";
    try {
      execFileSync(process.execPath, [tsc, "-p", dir], { encoding: "utf8", stdio: "pipe" });
    } catch (error) {
      output = String((error as { stdout?: string }).stdout ?? error);
    }
    // Point each error at the doc line it came from.
    const located = output.replace(
      /^(?:[^\n(]*\/)?([\w.]+\.ts)\((\d+),(\d+)\)/gm,
      (match, name: string, line: string) => {
        const block = files.get(name);
        return block === undefined ? match : `${block.doc}:${block.line + Number(line) - 1}`;
      },
    );
    expect(located.trim()).toBe("");
  }, 60_000);
});
