import { stat, statfs } from "node:fs/promises";
import { type Finding, finding } from "./finding.js";

/**
 * `statfs` types of file systems that are not local to this host (Linux's magic numbers): lock
 * files there are seen by other hosts only as the network file system lets them (NFS's attribute
 * cache, SMB's oplocks), and a holder's pid is not another host's.
 */
const NETWORK_FILE_SYSTEMS: ReadonlyMap<number, string> = new Map([
  [0x6969, "NFS"],
  [0x517b, "SMB"],
  [0xff534d42, "CIFS"],
  [0xfe534d42, "SMB2"],
  [0x01021997, "9p"],
  [0x00c36400, "Ceph"],
  [0x0bd00bd0, "Lustre"],
  [0x01161970, "GFS2"],
  [0x7461636f, "OCFS2"],
  [0x65735546, "FUSE"],
  [0x564c, "NCP"],
  [0x47504653, "GPFS"],
  [0xa501fcf5, "VxFS"],
]);

/** The name of `type` when it is a network (or FUSE) file system, else undefined. */
export function networkFileSystem(type: number): string | undefined {
  return NETWORK_FILE_SYSTEMS.get(type);
}

/** What a store's files on a network file system cost, in the finding's words (see {@link onNetworkFileSystem}). */
export interface NetworkFileSystemCost {
  /** The finding's code. */
  readonly code: string;
  /** The files, as the message names them (`"The lock directory /var/lock/x"`). */
  readonly files: string;
  /** What holds between the processes of one host only. */
  readonly oneHost: string;
  /** What a FUSE file system may not keep. */
  readonly fuseMayNotKeep: string;
  /** What to change. */
  readonly fix: string;
}

/**
 * The finding of a store's files on `network` (see {@link networkFileSystem}): an error, or a
 * warning for FUSE, which may be local after all.
 */
export function onNetworkFileSystem(network: string, cost: NetworkFileSystemCost): Finding {
  const fuse = network === "FUSE";
  const across = fuse
    ? `a FUSE file system may not keep ${cost.fuseMayNotKeep} or be local`
    : "a network file system does not keep them across hosts";
  return finding(
    fuse ? "warning" : "error",
    cost.code,
    `${cost.files} is on ${network}: ${cost.oneHost}, and ${across}`,
    cost.fix,
  );
}

/**
 * The findings of a FileLocker's lock directory: on a network file system (a lock there is only
 * as good as its caching and its holders' pids, which mean nothing on another host), or readable
 * and writable by its owner alone (the default: another user's processes neither see nor take
 * these locks, so the same command run by two users runs twice).
 */
export async function checkFiles(directory: string): Promise<Finding[]> {
  const found: Finding[] = [];
  let info: { type: number } | undefined;
  try {
    info = await statfs(directory);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    // Not made yet: the first lock makes it (mode 0700); a local temporary folder by default.
    if (code !== "ENOENT") {
      const detail = error instanceof Error ? error.message : String(error);
      return [finding("error", "file-directory-unusable", `The lock directory ${directory} cannot be read: ${detail}`)];
    }
  }
  const network = info === undefined ? undefined : networkFileSystem(info.type);
  if (network !== undefined) {
    found.push(
      onNetworkFileSystem(network, {
        code: "file-network-filesystem",
        files: `The lock directory ${directory}`,
        oneHost:
          "FileLocker's locks are for the processes of one host (an atomic rename, a holder judged alive by its pid)",
        fuseMayNotKeep: "rename atomic",
        fix: "Keep the lock directory on a local file system (tmpfs, ext4, xfs…); across hosts, use Redis, PostgreSQL or etcd",
      }),
    );
  }
  const mode = await stat(directory).then(
    (entry) => entry.mode & 0o777,
    () => 0o700,
  );
  if ((mode & 0o077) === 0) {
    found.push(
      finding(
        "info",
        "file-directory-per-user",
        `The lock directory ${directory} is its owner's alone (mode ${mode.toString(8)}): only processes of that user share these locks; the same command run by another user takes its own`,
        "To share locks between users, give them one directory they can all write (install -d -m 2775 -g locks /var/lock/globallock) as `directory` or --dir",
      ),
    );
  }
  return found;
}
