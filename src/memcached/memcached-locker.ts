import { LockCore } from "../core/lock-core.js";
import { attachDeploymentCheck } from "../deployment/check-deployment.js";
import { checkMemcached } from "../deployment/memcached.js";
import { InvalidArgumentError } from "../errors.js";
import { validateOptionsObject } from "../internal/validate.js";
import { CoreLocker } from "../lockers/core-locker.js";
import { KeyNames } from "./layout.js";
import { memcachedBackend } from "./memcached-backend.js";
import {
  type MemcachedLockerOptions,
  type ResolvedMemcachedLockerOptions,
  resolveMemcachedOptions,
} from "./options.js";
import type { MemcachedClient } from "./types.js";

const COMMANDS = ["add", "get", "getMulti", "gets", "cas"] as const;

/** Checks the client argument of a Memcached locker; answers its namespace. */
function namespaceOf(client: unknown): string {
  const candidate = client as Record<string, unknown> | null | undefined;
  if (
    typeof candidate !== "object" ||
    candidate === null ||
    COMMANDS.some((name) => typeof candidate[name] !== "function")
  ) {
    throw new InvalidArgumentError(
      "client",
      "a client of the memcached package (new Memcached(location, options))",
      client,
    );
  }
  const namespace = candidate.namespace ?? "";
  if (typeof namespace !== "string") throw new InvalidArgumentError("client.namespace", "a string", namespace);
  return namespace;
}

/**
 * A {@link Locker} on Memcached, through a client of the `memcached` package (2.x) the caller
 * creates, owns and ends — best made with {@link MEMCACHED_CLIENT_OPTIONS}, whose settings keep a
 * server restart from hanging commands for long or ending the process. Symfony's MemcachedStore,
 * with a guard against restarts.
 *
 * - **Memcached is a cache.** It may evict a held lock's item (unless started with `-M`), loses
 *   every item when it restarts, and `flush_all` empties it. A holder finds its item gone at its
 *   next extension (within `expiry / 2`): its lease is lost ("taken"), and meanwhile another caller
 *   may have taken the key. Fencing tokens are refused (`UnsupportedError`): Memcached has no
 *   counter that survives a restart or an eviction. Use it where a second holder now and then costs
 *   duplicate work, not corrupt data; `checkDeployment` reports evictions.
 * - **Locks.** A lock is an item `<prefix><key>` added only if absent (`add`), its value the
 *   lock's token, lease and `owner`. Its TTL is the lease rounded up to whole seconds, plus two:
 *   Memcached's clock counts seconds and ticks once a second, so an item can live up to two
 *   seconds less than its TTL. A holder's lease is trusted locally for the lease from the moment
 *   the command was sent, less 1% and 2 ms; a dead holder's lock is freed 0 to 3 s after that.
 *   Extensions and releases read the item with its CAS unique, compare the token and write with
 *   `cas` (a release stores it expired): a holder never extends nor deletes another's lock.
 * - **Restarts and flushes.** A server that lost its items would grant a key whose earlier holder
 *   still works, up to a lease before its next extension tells it. So after each `add` the locker
 *   reads two items of the prefix (one `get`): while it finds the server has lost them, it deletes
 *   the lock it just stored and grants nothing under the prefix for a lease (this locker's
 *   `expiry`, or the acquisition's if longer), as Redlock's delayed restart. The first lock ever
 *   taken on a server waits that lease too. Lockers of one prefix should share `expiry`: the
 *   longest lease a holder may believe in is what a restart must wait out.
 * - **Keys.** A key of printable ASCII without spaces or `$`, not starting with `#`, that fits
 *   Memcached's 250 bytes (with the prefix and the client's namespace) is used as it is; any other
 *   key is hashed (SHA-256, `<prefix>#<base64url>`), so every valid key can be locked.
 * - **Waiting.** Memcached has no queue and tells nobody of a delete, so waiters poll: the core's
 *   safety net, every `backoff` (50 ms doubling to 1 s by default; each poll one `add`, and one
 *   `get` of the holder's item to learn when it runs out), capped at when the holder's item runs
 *   out should it stop extending it. Releases by lockers of this process, on any client of the same
 *   servers and namespace, wake waiters at once. No fairness across processes.
 * - **Costs.** Uncontended `lock` + release: `add`, `get` (the guard), `gets`, `cas`. Each
 *   extension: `gets`, `cas`.
 * - **Hand-off.** `handOff`/`adopt` work: adopting writes the item again with the adopter's token.
 * - **Close.** `close()` rejects waiters and stops extensions; held locks stay until released or
 *   until their item runs out. It never ends the caller's client.
 */
export class MemcachedLocker extends CoreLocker<ResolvedMemcachedLockerOptions> {
  /**
   * @param client a `memcached` client, created, owned and ended by the caller.
   * @param options see {@link MemcachedLockerOptions}.
   */
  constructor(client: MemcachedClient, options?: MemcachedLockerOptions) {
    const namespace = namespaceOf(client);
    validateOptionsObject("options", options);
    const resolved = resolveMemcachedOptions(options);
    const names = new KeyNames(resolved.prefix, namespace);
    super(new LockCore(resolved, memcachedBackend(client, resolved, names)), "memcached-lock");
    attachDeploymentCheck([this], () => checkMemcached(client));
  }
}
