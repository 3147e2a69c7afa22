/** Options bags: each option read exactly once, unknown names and null rejected, timer limits. */
import { describe, expect, it } from "vitest";
import { resolveEtcdOptions } from "../../src/etcd/options.js";
import { resolveFileOptions } from "../../src/file/options.js";
import { InvalidArgumentError, MemoryLocker, MemoryReadWriteLocker, MemorySemaphore } from "../../src/index.js";
import { MAX_TIMER_DELAY_MS, resolveAcquireOptions } from "../../src/internal/validate.js";
import { resolveMySqlOptions } from "../../src/mysql/options.js";
import { resolvePostgresOptions } from "../../src/postgres/options.js";
import { type RedisLockerOptions, resolveOptions } from "../../src/redis/options.js";

/** Valid values for every Redis option; each has a different "second read" below. */
const VALID: Required<Omit<RedisLockerOptions, "backoff">> = {
  expiry: 10_000,
  prefix: "p:",
  operationTimeout: 300,
  driftFactor: 0.02,
  sweepConcurrency: 7,
  onLockLost: () => undefined,
  owner: "worker-1",
  scripts: false,
};

/**
 * An object whose getters return `first` on the first read and NaN on every later one, counting
 * reads per property in `reads`.
 */
function twoFaced<T extends object>(first: T, reads: Map<string, number>): T {
  const bag = {};
  for (const [name, value] of Object.entries(first)) {
    Object.defineProperty(bag, name, {
      enumerable: true,
      get() {
        const count = (reads.get(name) ?? 0) + 1;
        reads.set(name, count);
        return count === 1 ? value : Number.NaN;
      },
    });
  }
  return bag as T;
}

/** The same as {@link twoFaced}, as a Proxy over a plain object (counting `get` traps). */
function twoFacedProxy<T extends object>(first: T, reads: Map<string, number>): T {
  return new Proxy(first, {
    get(target, name, receiver) {
      if (typeof name !== "string") return Reflect.get(target, name, receiver);
      const count = (reads.get(name) ?? 0) + 1;
      reads.set(name, count);
      return count === 1 ? Reflect.get(target, name, receiver) : Number.NaN;
    },
  });
}

function expectInvalid(fn: () => unknown, argument: string, message: RegExp): InvalidArgumentError {
  let caught: unknown;
  try {
    fn();
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(InvalidArgumentError);
  const error = caught as InvalidArgumentError;
  expect(error.argument).toBe(argument);
  expect(error.message).toMatch(message);
  return error;
}

describe("each option is read exactly once", () => {
  for (const [label, make] of [
    ["getters", twoFaced],
    ["a Proxy", twoFacedProxy],
  ] as const) {
    it(`RedisLocker options with ${label} (a second read would give NaN)`, () => {
      const reads = new Map<string, number>();
      const backoffReads = new Map<string, number>();
      const backoff = make({ min: 40, max: 900 }, backoffReads);
      const options = make({ ...VALID, backoff }, reads);
      const resolved = resolveOptions(options);
      expect(resolved).toEqual({
        expiry: 10_000,
        prefix: "p:",
        operationTimeout: 300,
        owner: "worker-1",
        driftFactor: 0.02,
        backoffMin: 40,
        backoffMax: 900,
        sweepConcurrency: 7,
        onLockLost: VALID.onLockLost,
        scripts: false,
      });
      expect(Object.fromEntries(reads)).toEqual({
        expiry: 1,
        prefix: 1,
        operationTimeout: 1,
        owner: 1,
        driftFactor: 1,
        backoff: 1,
        sweepConcurrency: 1,
        onLockLost: 1,
        scripts: 1,
      });
      expect(Object.fromEntries(backoffReads)).toEqual({ min: 1, max: 1 });
    });

    it(`acquire options with ${label}`, async () => {
      const reads = new Map<string, number>();
      const given = { fencing: true, weight: 1, autoExtend: true, expiry: 500, maxHold: 1000 };
      expect(resolveAcquireOptions(make(given, reads))).toEqual({
        fencing: true,
        weight: 1,
        autoExtend: true,
        expiry: 500,
        maxHold: 1000,
      });
      expect(Object.fromEntries(reads)).toEqual({ fencing: 1, weight: 1, autoExtend: 1, expiry: 1, maxHold: 1 });

      const locker = new MemoryLocker();
      const leaseReads = new Map<string, number>();
      const lease = await locker.acquire(undefined, "read-once", make({ fencing: true }, leaseReads));
      expect(lease.fencingToken).toBe(1n);
      // Each option is read once (a Proxy is asked for the absent ones too, once each).
      expect(Object.values(Object.fromEntries(leaseReads)).every((count) => count === 1)).toBe(true);
      expect(leaseReads.get("fencing")).toBe(1);
      await lease.release();
      await locker.close();
    });
  }

  it("reads options a class provides through prototype getters (not own keys)", () => {
    class Settings {
      get expiry(): number {
        return 5000;
      }
    }
    expect(resolveOptions(new Settings()).expiry).toBe(5000);
  });
});

describe("unknown option names", () => {
  const redisNames =
    /valid options: expiry, prefix, operationTimeout, owner, driftFactor, backoff, sweepConcurrency, onLockLost/;

  it("RedisLocker: a misspelt name is named, with the valid names listed", () => {
    const error = expectInvalid(
      () => resolveOptions({ opertionTimeout: 500 } as RedisLockerOptions),
      "options.opertionTimeout",
      /no option "opertionTimeout"/,
    );
    expect(error.message).toMatch(redisNames);
    expect(error.message).toMatch(/^Invalid options\.opertionTimeout: expected .* received number 500$/);
  });

  it("RedisLocker: nested backoff names too", () => {
    expectInvalid(
      () => resolveOptions({ backoff: { mx: 5 } as RedisLockerOptions["backoff"] }),
      "options.backoff.mx",
      /no option "mx"; valid options: min, max\), received number 5/,
    );
  });

  it("acquire options: an unknown name is refused, listing the valid ones", async () => {
    expectInvalid(
      () => resolveAcquireOptions({ fencng: true }),
      "options.fencng",
      /valid options: fencing, weight, autoExtend, expiry, maxHold\)/,
    );
    const locker = new MemoryLocker();
    await expect(locker.acquire(undefined, "k", { fencing: false, wieght: 2 } as never)).rejects.toThrow(
      /options\.wieght.*valid options: fencing, weight/,
    );
    expect(locker.heldCount).toBe(0);
    await locker.close();
  });

  it("MemoryLocker: only an owner, so any other key is an error naming it", () => {
    expectInvalid(() => new MemoryLocker({ expiry: 10 } as never), "options.expiry", /valid options: owner\)/);
    expect(() => new MemoryLocker({ owner: "worker-1" })).not.toThrow();
    expect(() => new MemoryLocker({})).not.toThrow();
    expect(() => new MemoryLocker(undefined)).not.toThrow();
    expectInvalid(() => new MemoryLocker(null as never), "options", /received null/);
    expectInvalid(() => new MemoryLocker("x" as never), "options", /options object/);
  });

  it("symbol keys and non-enumerable properties are not options and are ignored", () => {
    const options = { expiry: 1000, [Symbol("meta")]: 1 };
    Object.defineProperty(options, "hidden", { value: 1, enumerable: false });
    expect(resolveOptions(options).expiry).toBe(1000);
  });
});

describe("null is not a default (undefined is)", () => {
  const names = [
    "expiry",
    "prefix",
    "operationTimeout",
    "driftFactor",
    "backoff",
    "sweepConcurrency",
    "onLockLost",
  ] as const;
  for (const name of names) {
    it(`options.${name}: null`, () => {
      const error = expectInvalid(
        () => resolveOptions({ [name]: null } as unknown as RedisLockerOptions),
        `options.${name}`,
        new RegExp(`^Invalid options\\.${name}: expected .*, received null$`),
      );
      expect(error.received).toBeNull();
    });
  }
  for (const name of ["min", "max"] as const) {
    it(`options.backoff.${name}: null`, () => {
      expectInvalid(
        () => resolveOptions({ backoff: { [name]: null } as never }),
        `options.backoff.${name}`,
        /received null$/,
      );
    });
  }

  it("acquire options.fencing: null", async () => {
    expectInvalid(() => resolveAcquireOptions({ fencing: null }), "options.fencing", /boolean.*received null$/);
    const locker = new MemoryLocker();
    await expect(locker.acquire(undefined, "k", { fencing: null } as never)).rejects.toThrow(InvalidArgumentError);
    expect(locker.heldCount).toBe(0);
    await locker.close();
  });

  it("explicit undefined everywhere means the defaults", () => {
    const all = Object.fromEntries(
      ["expiry", "prefix", "operationTimeout", "driftFactor", "sweepConcurrency", "onLockLost"].map((n) => [
        n,
        undefined,
      ]),
    );
    expect(resolveOptions({ ...all, backoff: { min: undefined, max: undefined } })).toEqual(resolveOptions(undefined));
    expect(resolveOptions(undefined)).toMatchObject({
      expiry: 30_000,
      prefix: "globallock:",
      operationTimeout: 2000,
      backoffMin: 50,
      backoffMax: 1000,
    });
    expect(
      resolveAcquireOptions({ fencing: undefined, weight: undefined, autoExtend: undefined, expiry: undefined }),
    ).toEqual({ fencing: false, weight: 1, autoExtend: true, expiry: undefined });
  });
});

describe("timer delays stay within Node's limit (2147483647 ms)", () => {
  it("exports the limit", () => {
    expect(MAX_TIMER_DELAY_MS).toBe(2 ** 31 - 1);
  });

  const tooLong = MAX_TIMER_DELAY_MS + 1;
  // (An operationTimeout past the limit is past expiry / 2 as well, which rejects it first.)
  const cases: Array<[string, RedisLockerOptions]> = [
    ["backoff.min", { expiry: MAX_TIMER_DELAY_MS, backoff: { min: tooLong } }],
    ["backoff.max", { expiry: MAX_TIMER_DELAY_MS, backoff: { max: tooLong } }],
  ];
  for (const [name, options] of cases) {
    it(`rejects options.${name} above it, naming the maximum`, () => {
      expectInvalid(() => resolveOptions(options), `options.${name}`, /2147483647.*received number 2147483648$/);
    });
  }

  it("accepts an expiry up to the limit (about 24.8 days), with defaults that are valid timer delays", () => {
    const resolved = resolveOptions({ expiry: MAX_TIMER_DELAY_MS });
    expect(resolved).toMatchObject({
      expiry: MAX_TIMER_DELAY_MS,
      operationTimeout: 2000,
      backoffMin: 50,
      backoffMax: 1000,
    });
  });

  it("caps backoff.max at expiry / 2", () => {
    const resolved = resolveOptions({ expiry: MAX_TIMER_DELAY_MS, backoff: { max: MAX_TIMER_DELAY_MS } });
    expect(resolved.backoffMax).toBe(Math.floor(MAX_TIMER_DELAY_MS / 2));
    expect(resolveOptions({ expiry: 1000, backoff: { max: 5000 } }).backoffMax).toBe(500);
  });

  it("defaults backoff.max to backoff.min when only a larger min is given", () => {
    expect(resolveOptions({ backoff: { min: 5000 } })).toMatchObject({ backoffMin: 5000, backoffMax: 5000 });
  });

  it("rejects an expiry above the limit on every locker, naming it (one constructor call works on every store or on none)", () => {
    const resolvers: Array<(options: { expiry: number }) => unknown> = [
      (options) => resolveOptions(options),
      (options) => resolvePostgresOptions(options),
      (options) => resolveMySqlOptions(options),
      (options) => resolveEtcdOptions(options as never),
      (options) => resolveFileOptions(options as never),
    ];
    for (const resolve of resolvers) {
      expect(() => resolve({ expiry: MAX_TIMER_DELAY_MS })).not.toThrow();
      expectInvalid(
        () => resolve({ expiry: MAX_TIMER_DELAY_MS + 1 }),
        "options.expiry",
        /2147483647.*received number 2147483648$/,
      );
      expectInvalid(() => resolve({ expiry: 2 ** 60 }), "options.expiry", /safe integer/);
    }
  });
});

describe("owner (every locker's option)", () => {
  const resolvers: Array<[string, (options: { owner?: unknown }) => unknown]> = [
    ["Redis", (options) => resolveOptions(options as RedisLockerOptions)],
    ["PostgreSQL", (options) => resolvePostgresOptions(options)],
    ["MySQL", (options) => resolveMySqlOptions(options)],
    ["etcd", (options) => resolveEtcdOptions(options as never)],
    ["file", (options) => resolveFileOptions(options as never)],
    ["memory", (options) => new MemoryLocker(options as never)],
    ["memory semaphore", (options) => new MemorySemaphore({ limit: 2, ...(options as object) })],
    ["memory read-write", (options) => new MemoryReadWriteLocker(options as never)],
  ];
  for (const [name, resolve] of resolvers) {
    it(`${name}: a non-empty string of at most 256 UTF-8 bytes, else an InvalidArgumentError naming it`, () => {
      expect(() => resolve({ owner: "x".repeat(256) })).not.toThrow();
      expect(() => resolve({ owner: "é".repeat(128) })).not.toThrow(); // 256 bytes
      for (const bad of ["x".repeat(257), "é".repeat(129), "", 7, null]) {
        let caught: unknown;
        try {
          resolve({ owner: bad });
        } catch (error) {
          caught = error;
        }
        expect(caught, String(bad)).toBeInstanceOf(InvalidArgumentError);
        expect((caught as InvalidArgumentError).argument).toBe("options.owner");
        expect((caught as InvalidArgumentError).received).toBe(bad);
      }
    });
  }
});

describe("count options (one check: validateCount)", () => {
  const cases = [
    [
      "MySqlLocker watchConnections",
      (value: unknown) => resolveMySqlOptions({ watchConnections: value }).watchConnections,
      "watchConnections",
    ],
    [
      "PostgresLocker waitingRooms",
      (value: unknown) => resolvePostgresOptions({ waitingRooms: value }).waitingRooms,
      "waitingRooms",
    ],
  ] as const;
  for (const [name, resolve, option] of cases) {
    it(`${name}: 0 and positive integers are accepted; a negative, fractional or non-number count is an InvalidArgumentError naming it`, () => {
      expect(resolve(0)).toBe(0);
      expect(resolve(7)).toBe(7);
      for (const bad of [-1, 1.5, Number.NaN, "4", true]) {
        let caught: unknown;
        try {
          resolve(bad);
        } catch (error) {
          caught = error;
        }
        expect(caught).toBeInstanceOf(InvalidArgumentError);
        expect((caught as InvalidArgumentError).message).toContain(`options.${option}`);
        expect((caught as InvalidArgumentError).received).toBe(bad);
      }
    });
  }
});
