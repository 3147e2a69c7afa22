import { type Finding, finding } from "./finding.js";

/** An in-process locker: nothing to check, one thing to know. */
export async function checkMemory(): Promise<Finding[]> {
  return [
    finding(
      "info",
      "memory-one-process",
      "An in-process locker: it excludes the callers of this process only, and its locks end with the process",
      "Across processes or hosts, use FileLocker (one host) or a server store",
    ),
  ];
}
