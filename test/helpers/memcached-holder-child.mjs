/**
 * A MemcachedLocker holder in a child process, for the SIGKILL test. It imports the locker from
 * a bundle of the sources (see bundledLocker in memcached-harness.ts). Argument: JSON { location,
 * clientOptions, key, expiry, module }. Sends { before } once it holds `key`, `before` being its
 * Date.now() just before it asked; then holds (extending) until killed.
 */
import { pathToFileURL } from "node:url";
import Memcached from "memcached";

const { location, clientOptions, key, expiry, module } = JSON.parse(process.argv[2] ?? "{}");
const { MemcachedLocker } = await import(pathToFileURL(module).href);
const client = new Memcached(location, clientOptions);
const locker = new MemcachedLocker(client, { expiry, owner: "memcached-child" });
const before = Date.now();
await locker.acquire(undefined, key);
process.send?.({ before });
process.on("disconnect", () => process.exit(0));
