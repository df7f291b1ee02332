/// How `counter-node` commands end: the process exit statuses `--help` documents.
public enum ExitStatus: Int32 {
    case success = 0
    /// The command ran and failed (a server unreachable, PostgreSQL refused, …).
    case failure = 1
    /// The command line or a setting is invalid; nothing was done.
    case usage = 2
    /// An operator command found no node at `--node`.
    case unreachable = 3
    /// The node refused the admin token.
    case unauthorized = 4
    /// `inspect` or `reconcile` found drift (and `reconcile` left some unrepaired).
    case driftFound = 5
    /// `flush --wait` ran out of time; the node goes on flushing.
    case timedOut = 6
    /// A command on the whole cluster got an answer that leaves something out: a live node did
    /// not answer, or slots had no live owner (named on standard error).
    case incomplete = 7
}
