/**
 * Peers the benches count only when they are installed. They are not dev dependencies: every
 * published version of redlock-universal requires Node.js 22, and `npm ci` on Node.js 20 (which
 * globallock supports) would warn EBADENGINE for it. Its figures measured earlier are kept in
 * docs/benchmarks.md.
 */

/** Mode → the note printed when its package is missing. */
const OPTIONAL_PEERS = {
  "redlock-universal":
    "redlock-universal is not installed (it needs Node 22): `npm i --no-save redlock-universal` to count it",
};

/**
 * Why `mode` cannot be counted here: the note when it is an optional peer whose package is not
 * installed, else undefined.
 * @param {string} mode
 * @returns {string | undefined}
 */
export function missingPeer(mode) {
  const note = OPTIONAL_PEERS[mode];
  if (note === undefined) return undefined;
  try {
    import.meta.resolve(mode);
    return undefined;
  } catch (error) {
    if (error?.code === "ERR_MODULE_NOT_FOUND") return note;
    throw error;
  }
}
