import Persistence
import RedisDriver

/// One entry of the dead-letter stream as the flusher writes it: a change PostgreSQL did not
/// take (or a log entry that could not be read), with where it came from and why.
///
/// Fields: `log` and `entry` (the write-behind log and entry it was read from), `reason`, `at`
/// (Unix milliseconds), then the change as in the log (`u`, `p`, `l`, and `t`: when it was
/// acknowledged, which a replay keeps) or, for an entry that could not be read, `raw`; for a
/// change PostgreSQL refused also `sqlstate` and `message`.
struct DeadLetter: Sendable {
    /// The reason of a change to a post `posts` does not have.
    static let missingPostReason = "post does not exist in posts"
    /// The reason of a change PostgreSQL refused on its own (a trigger, a constraint, a value).
    static let refusedReason = "PostgreSQL refused the change"

    let slot: UInt16
    let entryID: StreamEntryID
    var change: LikeChange?
    var raw: String?
    /// PostgreSQL's SQLSTATE and message, for a refused change.
    var refusal: (sqlState: String, message: String)?

    init(
        slot: UInt16, entryID: StreamEntryID, change: LikeChange? = nil, raw: String? = nil,
        refusal: (sqlState: String, message: String)? = nil
    ) {
        self.slot = slot
        self.entryID = entryID
        self.change = change
        self.raw = raw
        self.refusal = refusal
    }

    /// The stream entry's fields.
    func fields(log: String, reason: String, at: String) -> [(String, RedisArgument)] {
        var fields: [(String, RedisArgument)] = [("log", log), ("entry", entryID.description), ("reason", reason), ("at", at)]
        if let change { fields += ChangeLogEntry.fields(of: change) }
        if let raw { fields.append(("raw", raw)) }
        if let refusal { fields += [("sqlstate", refusal.sqlState), ("message", refusal.message)] }
        return fields
    }
}
