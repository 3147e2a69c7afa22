/**
 * The command line as flock(1)'s users type it: `run [options] KEY command [args...]`,
 * `run [options] KEY -c 'command'`, `status KEY`, with `--key` and `--` still working; parsed
 * without starting anything.
 */
import { describe, expect, it } from "vitest";
import { parseCommandLine } from "../../src/cli/args.js";
import { UsageError } from "../../src/cli/usage.js";

const parse = (...argv: string[]) => parseCommandLine(argv, {});
const run = (...argv: string[]) => {
  const invocation = parse("run", ...argv);
  if (invocation.command !== "run") throw new Error(`parsed as ${invocation.command}`);
  return invocation;
};

describe("globallock's command line, flock(1)'s form", () => {
  it("takes the first argument that is not an option as the key, and the rest as the command", () => {
    const parsed = run("-n", "fl", "echo", "ran");
    expect(parsed).toMatchObject({ key: "fl", waitMs: 0, argv: ["echo", "ran"] });
  });

  it("leaves options after the key to the command (getopt's + mode, as flock)", () => {
    expect(run("-w", "5", "k", "ls", "-l", "--all", "-n").argv).toEqual(["ls", "-l", "--all", "-n"]);
    expect(run("-w5", "k", "ls").waitMs).toBe(5000);
    expect(run("-nE", "0", "k", "ls")).toMatchObject({ waitMs: 0, conflictExitCode: 0, key: "k" });
    expect(run("--wait=2", "k", "ls").waitMs).toBe(2000);
  });

  it("takes `KEY -c 'command'` as flock does, and -c before the key too", () => {
    expect(run("/tmp/x.lock", "-c", "echo ran")).toMatchObject({ key: "/tmp/x.lock", argv: ["sh", "-c", "echo ran"] });
    expect(run("-c", "echo ran", "k")).toMatchObject({ key: "k", argv: ["sh", "-c", "echo ran"] });
    expect(run("k", "--command", "true").argv).toEqual(["sh", "-c", "true"]);
  });

  it("keeps --key and -- working", () => {
    expect(run("--key", "k", "--", "ls", "-l")).toMatchObject({ key: "k", argv: ["ls", "-l"] });
    expect(run("--key", "k", "ls", "-l")).toMatchObject({ key: "k", argv: ["ls", "-l"] });
    expect(run("k", "--", "ls", "-l")).toMatchObject({ key: "k", argv: ["ls", "-l"] });
  });

  it("status takes its key as an argument too", () => {
    expect(parse("status", "fl")).toMatchObject({ command: "status", key: "fl" });
    expect(parse("status", "--json", "fl")).toMatchObject({ key: "fl", json: true });
    expect(parse("status", "--key", "fl")).toMatchObject({ key: "fl" });
  });

  it("refuses what it cannot read, naming it", () => {
    const cases: Array<[string[], RegExp]> = [
      [[], /no command given/],
      [["run"], /no key/],
      [["run", "--key", "", "ls"], /the key is empty/],
      [["run", "", "ls"], /the key is empty/],
      [["run", "k"], /no command to run/],
      [["run", "k", "-c"], /-c takes one shell command/],
      [["run", "k", "-c", "a", "b"], /-c takes one shell command/],
      [["run", "-c", "a", "k", "-c", "b"], /-c given twice/],
      [["run", "-c", "a", "k", "ls"], /either -c COMMAND or a command/],
      [["run", "--bogus", "k", "ls"], /Unknown option '--bogus'/],
      [["status", "a", "b"], /unexpected argument "b"/],
      [["status", "--key", "a", "b"], /unexpected argument "b"/],
      [["status"], /no key/],
    ];
    for (const [argv, message] of cases) {
      expect(() => parse(...argv), argv.join(" ")).toThrow(UsageError);
      expect(() => parse(...argv), argv.join(" ")).toThrow(message);
    }
  });
});
