import type { Backend, DefaultedMember, LockHandle, StoreBackend } from "./backend.js";

/** What the core uses for a member a store left out: no hand-off queue, no per-resource limits. */
const DEFAULTS: Pick<Backend, DefaultedMember> = {
  resourceOf: (key) => key,
  hasQueue: () => false,
  checkResource: () => {},
  checkFencing: () => {},
  leaveQueue: async () => {},
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
