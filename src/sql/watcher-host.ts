/**
 * What the release watchers of the session-lock stores (PostgreSQL's markers, MySQL's probes)
 * need of their backend to stop: they start nothing new once the locker closes, and their own
 * close is the backend's (which closes the locker's session after them).
 */
export interface ClosingHost {
  /** True once the locker closes: the watcher starts nothing new. */
  closing(): boolean;
  /** The backend's own close (see `ReleaseWatcher.close`). */
  close(): Promise<void>;
}
