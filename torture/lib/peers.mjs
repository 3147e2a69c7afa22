/**
 * Child processes a scenario drives over IPC, one request and one reply at a time: the stale-lock
 * stealers of scenario 20 and the bursters of scenario 22.
 */
import { fork } from "node:child_process";
import { track } from "./cleanup.mjs";
import { within } from "./clock.mjs";

/** Forks `script` as peer `id` (tracked, so it is killed if the run ends first). */
export function forkPeer(script, id) {
  const child = fork(script, [], { stdio: ["ignore", "ignore", "inherit", "ipc"] });
  track(child);
  return { id, child, exited: new Promise((done) => child.once("exit", done)) };
}

/** Sends `message` to `peer`; resolves to its next reply of `type`, or rejects after `ms`. */
export function ask(peer, message, type, ms = 10_000) {
  return within(
    new Promise((resolve) => {
      const onMessage = (reply) => {
        if (reply.type !== type) return;
        peer.child.off("message", onMessage);
        resolve(reply);
      };
      peer.child.on("message", onMessage);
      peer.child.send(message);
    }),
    ms,
    `${peer.id} ${type}`,
  );
}

/** Tells every peer still connected to stop, and waits up to 10 s for all of them to exit. */
export async function stopPeers(peers) {
  for (const peer of peers) if (peer.child.connected) peer.child.send({ type: "stop" });
  await within(Promise.all(peers.map((peer) => peer.exited)), 10_000, "peers exit").catch(() => undefined);
}
