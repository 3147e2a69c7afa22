/**
 * The child side of {@link RemoteLocker} (remote-locker.ts): a locker in a child process, driven
 * over IPC. A child entry (a semaphore child of a store) calls {@link serve} with how to make its
 * locker; the entry is bundled from the sources by esbuild when a test starts (see `bundleChild`).
 * (file-peer-child.mjs speaks the same protocol for a FileLocker on the built package, with a few
 * requests of its own.) A request it does not serve (`adopt`, `handOff`) is answered with an error.
 *
 * Parent → child: { op: "open", id, options } | { op: "acquire", id, key, options, wait } |
 *   { op: "abort", id } | { op: "release", id } | { op: "inspect", id, key } | { op: "waiting", id }
 *   | { op: "close", id }
 * Child → parent: { event: "ready" } once listening; { id, ok, lease?, outcome?, info?, waiting?,
 *   error? } per request; { event: "lost", id, reason } when a held lease is lost.
 */
import type { Lease, Locker } from "../../src/index.js";

interface Request {
  readonly op: string;
  readonly id: number;
  readonly key?: string;
  readonly options?: unknown;
  readonly wait?: boolean;
}

const describeError = (error: unknown) => {
  const { name, code, message } = (error ?? {}) as { name?: string; code?: string; message?: string };
  return { name, code, message: String(message ?? error) };
};

/** Serves requests for the locker `open` makes from the parent's options, until disconnected. */
export function serve(open: (options: unknown) => Promise<Locker> | Locker): void {
  let locker: Locker | undefined;
  const pending = new Map<number, AbortController>();
  const leases = new Map<number, Lease>();
  const reply = (message: object): void => {
    process.send?.(message);
  };
  process.on("disconnect", () => process.exit(0));
  process.on("message", async (message: Request) => {
    const { op, id } = message;
    try {
      switch (op) {
        case "open":
          locker = await open(message.options);
          reply({ id, ok: true });
          break;
        case "acquire": {
          const controller = new AbortController();
          pending.set(id, controller);
          try {
            const options = message.options as Parameters<Locker["acquire"]>[2];
            const key = message.key as string;
            const lease = message.wait
              ? await (locker as Locker).acquire(controller.signal, key, options)
              : await (locker as Locker).tryAcquire(controller.signal, key, options);
            if (lease === undefined) {
              reply({ id, ok: true, lease: null });
              break;
            }
            leases.set(id, lease);
            lease.lost.addEventListener("abort", () =>
              reply({ event: "lost", id, reason: (lease.lost.reason as { reason?: string })?.reason }),
            );
            reply({ id, ok: true, lease: { fencingToken: lease.fencingToken?.toString() } });
          } finally {
            pending.delete(id);
          }
          break;
        }
        case "abort":
          pending.get(id)?.abort(new Error("aborted by the parent"));
          break;
        case "release": {
          const lease = leases.get(id);
          leases.delete(id);
          reply({ id, ok: true, outcome: lease === undefined ? "released" : await lease.releaseWithOutcome() });
          break;
        }
        case "inspect": {
          const info = await (locker as Locker).inspect(undefined, message.key as string);
          const holders = info.holders.map((holder) => ({ ...holder, fencingToken: holder.fencingToken?.toString() }));
          reply({ id, ok: true, info: { ...info, holders } });
          break;
        }
        case "waiting":
          reply({ id, ok: true, waiting: (locker as unknown as { waitingCount: number }).waitingCount });
          break;
        case "close":
          for (const controller of pending.values()) controller.abort(new Error("closing"));
          await locker?.close();
          reply({ id, ok: true });
          break;
        default:
          reply({ id, ok: false, error: { message: `remote-child does not serve ${op}` } });
      }
    } catch (error) {
      reply({ id, ok: false, error: describeError(error) });
    }
  });
  process.send?.({ event: "ready" });
}
