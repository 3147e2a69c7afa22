/**
 * Options of a `memcached` client (npm `memcached` 2.x) that a {@link MemcachedLocker} on one
 * server needs, to spread into the client's own: `new Memcached("host:11211", {
 * ...MEMCACHED_CLIENT_OPTIONS })`. What the client does by default, measured with a server killed
 * and started again:
 *
 * - `retries: 5` (with 1 s to 60 s between them): while the server is down, a command waits for a
 *   connection for up to 100 s. The locker gives up on it after `operationTimeout`, but the
 *   command may still run later. Here: `retries: 0` — it fails at once.
 * - `retry: 30000`: after a failure the client refuses every command to the server for 30 s, even
 *   once it is back. Here: 1 s.
 * - The client's way back from a server it counts as dead (`failures` issues, or a second issue
 *   while it waits to retry — which a restart with several connections open gives) runs the
 *   system's `ping` command after `reconnect` ms (default 5 h, on a timer that keeps the process
 *   alive): where `ping` is not installed, that child process's error is thrown and the process
 *   dies. Here: `remove: true`, which never takes that way (with one server the client keeps
 *   sending to it), and `failures` high enough that its count never runs out, reset after 1 s.
 * - `timeout: 5000` (connecting). Here: 1 s.
 *
 * For one server only: with several, `remove: true` takes a failed server out of the hash ring and
 * its keys move to another, where a second holder can get in. A lock lives on one server anyway
 * (Memcached replicates nothing): give the locks one.
 */
export const MEMCACHED_CLIENT_OPTIONS: Readonly<{
  /** Connection attempts of a command: 0, it fails at once while the server is down. */
  retries: number;
  /** How long a failed server is skipped, in ms. */
  retry: number;
  /** Connect timeout, in ms. */
  timeout: number;
  /** Issues before the client counts the server dead: never, in practice. */
  failures: number;
  /** After how long the count of issues starts again, in ms. */
  failuresTimeout: number;
  /** Never the `ping`-based reconnection (see above). */
  remove: boolean;
}> = Object.freeze({
  retries: 0,
  retry: 1000,
  timeout: 1000,
  // Finite: the client copies its settings through JSON, where Infinity becomes null (no retries).
  failures: 1_000_000_000,
  failuresTimeout: 1000,
  remove: true,
});
