import { UnsupportedError } from "../errors.js";
import type { Backend, DefaultedMember, LockHandle, StoreBackend } from "./backend.js";

/** Why a store that says nothing about hand-offs has none. */
const NO_HAND_OFF = "this store cannot hand a lease to another process";

/** What the core uses for a member a store left out: no hand-off queue, no per-resource limits. */
const DEFAULTS: Pick<Backend, DefaultedMember> = {
  resourceOf: (key) => key,
  hasQueue: () => false,
  checkResource: () => {},
  checkFencing: () => {},
  leaveQueue: async () => {},
  handOff: { unsupported: NO_HAND_OFF },
  adopt: () => Promise.reject(new UnsupportedError(`Adopting a lease: ${NO_HAND_OFF}`)),
  list: () => Promise.reject(new UnsupportedError("Listing held locks: this store cannot name its keys")),
  grantedHandle: (): LockHandle => {
    throw new Error("This store has no hand-off queue: nothing is granted");
  },
};

const NAMES = Object.keys(DEFAULTS) as DefaultedMember[];

/**
 * Makes `store` a {@link Backend}: each member it left out gets its default, once, when the
 * backend is made (a store that writes them all is returned as it is; no call goes through a
 * wrapper).
 */
export function withDefaults(store: StoreBackend): Backend {
  for (const name of NAMES) {
    if (store[name] === undefined) Object.defineProperty(store, name, { value: DEFAULTS[name] });
  }
  return store as Backend;
}
