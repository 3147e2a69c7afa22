import { type CoreSettings, LockCore } from "../../src/core/lock-core.js";
import { CoreLocker } from "../../src/lockers/core-locker.js";
import { FakeBackend } from "./fake-backend.js";

/**
 * The core's settings in the test bed unless a test says otherwise: a long lease (nothing is
 * extended during a test that does not ask for it) and a safety net so slow (60 s) that only an
 * event — a release here, a release message, `missed()` — can wake a waiter in a test's time.
 * `minExpiry: 1` lets an acquisition ask for a short lease, so that lease-keeping tests run in
 * well under a second.
 */
export const BED_SETTINGS: CoreSettings = Object.freeze({
  expiry: 60_000,
  operationTimeout: 20,
  backoffMin: 60_000,
  backoffMax: 60_000,
  sweepConcurrency: 2,
  onLockLost: undefined,
  minExpiry: 1,
  owner: "core-test-bed",
});

/**
 * A locker on the scripted store: a `CoreLocker` over a `new LockCore(settings, factory)`, wired as
 * every store's public locker is (see `MemoryLocker`), so the core runs exactly as it does in
 * production, only its backend is the fake.
 */
export class FakeLocker extends CoreLocker<CoreSettings> {
  /** The scripted store this locker's core drives. */
  readonly store: FakeBackend;

  constructor(settings: Partial<CoreSettings> = {}, store: FakeBackend = new FakeBackend()) {
    super(new LockCore({ ...BED_SETTINGS, ...settings }, (context) => store.attach(context)), "memory-lock");
    this.store = store;
  }
}
