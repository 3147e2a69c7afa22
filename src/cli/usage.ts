/**
 * What `globallock` prints about its command line: the usage lines, the help text, and the
 * {@link UsageError} every mistake on it is.
 */
import { EXIT } from "./exit-codes.js";

/** A mistake on the command line: printed with a pointer to `--help`, exit status 64. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

/** The usage lines, printed with every usage error. */
export const USAGE = `Usage:
  globallock run [options] KEY command [args...]
  globallock run [options] KEY -c 'shell command'
  globallock run [options] --key KEY -- command [args...]
  globallock run --limit N [options] KEY command [args...]
  globallock status [store options] [--json] KEY
  globallock list [store options] [--prefix P] [--limit N] [--json]
  globallock doctor [store options] [--json]
  globallock --help | --version
`;

/** The help text (`globallock --help`). */
export const HELP = `${USAGE}
Runs a command while holding a lock, so that only one copy of it runs at a time
(or at most N, with --limit N): among the processes of this host (the default:
lock files, no server needed), or across hosts through Redis. The lock is
extended while the command runs and released when it exits; the command's exit
status is passed through.

\`globallock list\` prints every held key of the store (at most --limit N, default
1000, at most 10000; --prefix P: only keys that start with P): its holder (or
how many share it), mode, time left and waiters, in 80 columns (--json: one JSON
object). It shows the keys of runs with and without --shared, as status does
(not the permits of --limit runs).

\`globallock doctor\` checks the store's setup (an eviction policy that can drop
lock keys, no persistence, replication, refused scripts, a lock directory on a
network file system…) and prints what it finds, with the fix for each: exit 0
nothing to fix, 1 warnings, 2 errors.

Store options (run, status, list and doctor):
  --redis URL            a Redis server: redis://[user:password@]host[:port][/db]
                         (rediss:// for TLS). Repeat it for a Redlock quorum of
                         independent servers (an odd number). Default: the URLs in
                         $GLOBALLOCK_REDIS_URL (separated by commas or spaces).
                         Needs the ioredis package next to globallock.
  --dir PATH             the lock directory of the file store (default:
                         $GLOBALLOCK_DIR, else <tmpdir>/globallock-<uid>, mode 0700:
                         one user's). For locks shared by several users of the
                         host, give them one directory they can all write, e.g.
                           install -d -m 2775 -g locks /var/lock/globallock
                         (setgid, group-writable, not sticky: a sticky directory
                         stops one user from taking over another's crashed lock).
                         In a directory writable by group or others, the lock
                         files get the same group/other write permission.

KEY is the lock's name, as flock(1)'s file: the first argument that is not an
option, unless --key gives it. The command starts after it; everything from
there on is the command's, options included.

Run options:
  --key NAME             the lock's name (instead of KEY)
  -c COMMAND             run COMMAND through sh -c (instead of a command after KEY)
  -s, --shared           a shared lock: any number of shared holders at once, or
                         one exclusive (file store and one Redis server)
  -x, --exclusive        an exclusive lock (the default)
  --limit N              at most N runs of KEY at once, not one (a permit of the
                         store's semaphore each; file store and one Redis
                         server). Every run of KEY must pass the same N; runs
                         with --limit and runs without it do not exclude each
                         other. Not with --shared
  -w, --wait DURATION    give up after waiting this long for the lock (default:
                         wait as long as it takes); 0 makes one attempt
  -n, --no-wait          the same as --wait 0
  -E, --conflict-exit-code CODE
                         the exit status when the lock is held elsewhere
                         (--no-wait) or --wait ran out (default 75 and 124)
  --expiry DURATION      the lease: extended every expiry/2 while the command
                         runs; a crashed holder's lock is free after it (default 30s)
  --fencing-env NAME     pass the lock's fencing token (a number that rises with
                         every grant of the key) to the command as $NAME
                         (file store and a single Redis server)
  --on-lost warn|kill    when the lock is lost while the command runs: print a
                         warning and let it run (warn, the default), or stop it
                         (kill: SIGTERM, then SIGKILL after --kill-after)
  --kill-after DURATION  the grace between SIGTERM and SIGKILL (default 10s)
  --owner NAME           who holds the lock, as status shows it (at most 256
                         bytes; default hostname:pid)
  --max-hold DURATION    stop extending the lease after this long: it then runs
                         out and is lost (reason max-hold), and --on-lost applies
  --json                 report every event as one JSON line on stderr

Durations: 250ms, 10s, 5m, 1h, or a number of seconds (1.5). While waiting on a
terminal, one status line on stderr says who holds the lock and for how long
we have waited; nothing is printed otherwise (errors aside) unless --json.

SIGINT, SIGTERM and SIGHUP are forwarded to the command; the lock is released
after the command exits. (SIGINT is not forwarded when stdin is a terminal: a
Ctrl-C there already reaches the command, which runs in the same process group.)

If globallock itself is killed (kill -9, the OOM killer), the command dies with
it, since nothing keeps the lock alive any more: on Linux the command is started
through util-linux \`setpriv --pdeathsig KILL\` (skipped where setpriv is
missing), and a helper process SIGKILLs every process started under it (marked
by $GLOBALLOCK_RUN_ID in its environment; one that clears its environment
escapes). Elsewhere (macOS) the command can outlive a killed globallock.
Background children still running when the command exits normally are left
alone, as with flock(1).

Exit status:
  the command's own     0-255; 128+N when the command was killed by signal N
  64                    bad usage: an unknown option, a bad value, no command
  69                    the store could not be reached (Redis down, the lock
                        directory not writable)
  70                    internal error
  75                    the lock is held by someone else (--no-wait, --wait 0;
                        -E CODE changes it)
  124                   --wait ran out before the lock was obtained (-E too)
  125                   the lock was lost and --on-lost kill stopped the command
  126                   the command could not be executed
  127                   the command was not found
  128+N                 interrupted by signal N while waiting for the lock
  status: 0 held, 1 free, 64 bad usage, 69 store unreachable
  list: 0 listed (none held too), 64 bad usage, 69 store unreachable
  doctor: 0 nothing to fix, 1 warnings, 2 errors, 64 bad usage

Examples:
  # Only one backup at a time on this host (others wait):
  npx globallock run backup ./backup.sh
  # A cron job that skips its turn when the previous run is still going:
  globallock run --no-wait report node report.js || [ $? -eq 75 ]
  # flock(1)'s way: no wait, status 0 when skipped, a shell command:
  globallock run -n -E 0 report -c 'node report.js > report.log'
  # At most 4 conversions at once on this host (GNU sem's job), the rest wait:
  globallock run --limit 4 convert ./convert.sh "$file"
  # Many readers at once, or one writer:
  globallock run -s catalog ./read-catalog.sh
  globallock run catalog ./rebuild-catalog.sh
  # Across hosts, waiting at most 5 minutes:
  globallock run --redis redis://locks.internal:6379 --key deploy --wait 5m -- ./deploy.sh
  # A Redlock quorum, the fencing token for the protected resource, stop on loss:
  globallock run --redis redis://a:6379 --redis redis://b:6379 --redis redis://c:6379 \\
    --key migrate --on-lost kill -- ./migrate.sh
  globallock run --key db --fencing-env LOCK_TOKEN -- sh -c 'psql -v token=$LOCK_TOKEN ...'
  # Is it held?
  globallock status backup
  # Which locks are held on this host, and by whom? On this Redis, under deploy?
  globallock list
  globallock list --redis redis://locks.internal:6379 --prefix deploy
  # Is the store set up so that locks hold?
  globallock doctor --redis redis://locks.internal:6379
`;

/** What a usage error prints (the message, then the usage lines), and its exit status. */
export function usageMessage(error: UsageError): { text: string; code: number } {
  return {
    text: `globallock: ${error.message}\n${USAGE}Try 'globallock --help' for more information.\n`,
    code: EXIT.USAGE,
  };
}
