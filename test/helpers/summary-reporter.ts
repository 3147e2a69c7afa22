import type { Reporter, TestModule } from "vitest/node";

/**
 * Ends a run with one plain line, `N passed, N failed, N skipped`, that any CI can read. A test
 * file that fails outside its tests (an import error, a `beforeAll` or `afterAll` that throws)
 * counts as one failure, and the tests it kept from running are counted as failed, not skipped:
 * a setup error must never read as a clean run.
 */
/** How many of the slowest files a run lists. */
const SLOWEST_SHOWN = 12;

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const testModule of testModules) {
      let passedHere = 0;
      let failedHere = 0;
      let skippedHere = 0;
      for (const test of testModule.children.allTests()) {
        const state = test.result().state;
        if (state === "passed") passedHere += 1;
        else if (state === "failed") failedHere += 1;
        else skippedHere += 1;
      }
      if (testModule.state() === "failed" && failedHere === 0) {
        // It failed outside its tests: the file counts as one failure, the tests it kept from
        // running as failures too.
        failedHere = Math.max(1, skippedHere);
        skippedHere = 0;
      }
      passed += passedHere;
      failed += failedHere;
      skipped += skippedHere;
    }
    // The files that took longest (tests and hooks): where the suite's time goes, for whoever trims it.
    const slowest = [...testModules]
      .map((testModule) => ({ id: testModule.moduleId, ms: testModule.diagnostic().duration }))
      .sort((a, b) => b.ms - a.ms)
      .slice(0, SLOWEST_SHOWN);
    const root = `${process.cwd()}/`;
    for (const { id, ms } of slowest) {
      process.stdout.write(
        `  ${(ms / 1000).toFixed(1).padStart(6)} s  ${id.startsWith(root) ? id.slice(root.length) : id}\n`,
      );
    }
    process.stdout.write(`\nvitest: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
