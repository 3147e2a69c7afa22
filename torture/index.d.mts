/** Types of index.mjs, for test/contracts/torture.test.ts (TypeScript does not read the .mjs files). */

/** One named check of a run. */
export interface TortureCheck {
  readonly name: string;
  readonly pass: boolean;
  readonly expected: string;
  readonly observed: string;
}

/** The result of one run of one scenario. */
export interface TortureResult {
  readonly scenario: string;
  readonly seed: number;
  readonly pass: boolean;
  readonly durationMs: number;
  readonly checks: readonly TortureCheck[];
  readonly failures: readonly TortureCheck[];
  /** Scenario-specific numbers (overlaps, lostUpdates, delays in ms…); see each scenario module. */
  readonly metrics: Readonly<Record<string, number | string | undefined>>;
}

/** Scenario ids in report order. */
export declare const SCENARIO_IDS: readonly string[];

/** Throws a clear message when redis-server is missing or the package has not been built. */
export declare function assertReady(): void;

/** Runs scenario `id` of `profile` once, with `seed` (default: the profile's first seed). */
export declare function runProfileScenario(
  id: string,
  profile?: "short" | "full",
  seed?: number,
): Promise<TortureResult>;

/** Kills every child process (workers, redis-servers) still running. */
export declare function killAllChildren(): void;
