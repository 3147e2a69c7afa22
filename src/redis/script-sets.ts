import {
  ACQUIRE_PERMITS,
  ADOPT_PERMITS,
  EXTEND_PERMITS,
  INSPECT_PERMITS,
  ISSUE_PERMIT_FENCING_TOKEN,
  LEAVE_PERMIT_QUEUE,
  RELEASE_PERMITS,
} from "./permit-scripts.js";
import type { Script } from "./script-runner.js";
import { ACQUIRE, ADOPT, EXTEND_MANY, INSPECT, ISSUE_FENCING_TOKEN, LEAVE_QUEUE, RELEASE } from "./scripts.js";

/**
 * The scripts a store on one node or Cluster runs: the same KEYS and ARGV for locks (scripts.ts)
 * and for counted locks (permit-scripts.ts), so the store calls either set alike.
 */
export interface ScriptSet {
  readonly acquire: Script;
  readonly extendMany: Script;
  readonly release: Script;
  readonly leaveQueue: Script;
  readonly issueFencingToken: Script;
  readonly inspect: Script;
  readonly adopt: Script;
}

/** The scripts of locks: one token per key. */
export const LOCK_SCRIPTS: ScriptSet = {
  acquire: ACQUIRE,
  extendMany: EXTEND_MANY,
  release: RELEASE,
  leaveQueue: LEAVE_QUEUE,
  issueFencingToken: ISSUE_FENCING_TOKEN,
  inspect: INSPECT,
  adopt: ADOPT,
};

/** The scripts of counted locks (semaphores, read-write locks): a set of holders per key. */
export const PERMIT_SCRIPTS: ScriptSet = {
  acquire: ACQUIRE_PERMITS,
  extendMany: EXTEND_PERMITS,
  release: RELEASE_PERMITS,
  leaveQueue: LEAVE_PERMIT_QUEUE,
  issueFencingToken: ISSUE_PERMIT_FENCING_TOKEN,
  inspect: INSPECT_PERMITS,
  adopt: ADOPT_PERMITS,
};
