import Foundation
import Persistence
import RedisDriver
import ShardRouter

/// One flush of a shard, as the data its steps pass along — what was planned, read, applied and
/// is still to be trimmed. The steps themselves are `WriteBehind`'s:
///
/// **rescan** the logs whose content is unknown → **plan** (`FlushScheduler.flushPlan`, the slots
/// held) → **read** whole entries → **coalesce** them into changes (malformed entries become dead
/// letters) → **apply** in one transaction that records each log's progress (posts found missing
/// and changes PostgreSQL refuses become dead letters first, then the transaction is tried again;
/// slots PostgreSQL gives to another owner are given up and left out) → **trim** what was applied
/// → **settle** the scheduler's books. Nothing here does I/O or throws: every outcome, a
/// rollback included, comes back as a value.
struct FlushRun {
    /// Where the run is.
    enum Step: Equatable {
        /// Reading the length and newest entry of the logs in `slots` again.
        case rescanning([UInt16])
        /// Reading the planned slots' logs.
        case reading
        /// Writing the malformed entries read as dead letters.
        case deadLetteringMalformed
        /// The transaction is running.
        case applying
        /// Writing dead letters found by the transaction, which is then tried again.
        case deadLettering
        /// Trimming the logs of what the transaction applied.
        case trimming
        /// Its steps are done, but a read of PostgreSQL's recorded progress of logs that read
        /// empty is out (`WriteBehind.flushProgressRead`): the run ends with its answer, so the
        /// loop neither reads those logs again meanwhile nor goes on without a back-off when it
        /// fails.
        case checkingProgress
    }

    var step: Step
    /// When the read began (the run, until it is planned): a slot read to its end counts as
    /// dirty since then if entries remain.
    var startedAt: ContinuousClock.Instant
    /// The plan, once made (after the rescan).
    var plan: FlushScheduler.FlushPlan?
    /// The epoch each planned slot is flushed under (empty for a sole writer): the transaction
    /// checks them in PostgreSQL, the trim in Redis.
    var epochs: [UInt16: Int64] = [:]
    /// The first failure of a Redis node met along the way: the run goes on with the other
    /// slots, and fails at its end so the loop backs off.
    var nodeFailure: Error?

    /// The changes read, in log order.
    var entries: [LoggedLikeChange] = []
    /// Entries that could not be read, per slot.
    var malformed: [(slot: UInt16, entry: StreamEntry)] = []
    /// The newest entry read per slot.
    var newestRead: [UInt16: StreamEntryID] = [:]
    /// Per slot read: how many entries, holding how many changes (a malformed entry counts one).
    var readCounts: [UInt16: (entries: Int, changes: Int)] = [:]
    /// Slots whose read stopped at its budget rather than at the log's end.
    var fullReads: Set<UInt16> = []
    /// Per slot, the ids of the entries read (malformed ones included): the log's head, up to
    /// `newestRead`.
    var entriesRead: [UInt16: Set<StreamEntryID>] = [:]

    /// Posts found missing in PostgreSQL, whose changes are dead letters already.
    var knownMissing: Set<Int64> = []
    /// Pairs whose last change PostgreSQL refused, dead letters already.
    var knownRejected: Set<LikePair> = []
    /// Slots PostgreSQL gives to another owner: left out of the transaction, not trimmed.
    var stale: Set<UInt16> = []
    /// When the transaction committed.
    var committedAt: Date?
    /// Dead letters being written now, counted once they are.
    var lettersInFlight = 0
    /// The posts of the refused changes among the letters being written: pinned in Redis once
    /// they are (`DeadLetterPins`).
    var refusedPostsInFlight: [Int64] = []

    init(now: ContinuousClock.Instant, rescanning slots: [UInt16]) {
        startedAt = now
        step = slots.isEmpty ? .reading : .rescanning(slots)
    }

    /// Takes in what the reads of the planned slots returned (`nil`: the slot's node failed).
    mutating func take(_ reads: [UInt16: LogRead], layout: RedisKeyLayout) {
        for slot in plan?.slots.map(\.slot) ?? [] {
            guard let read = reads[slot] else { continue }
            if read.mayHaveMore { fullReads.insert(slot) }
            entriesRead[slot] = Set(read.entries.map(\.id))
            let log = layout.changeLog(of: HashSlot(rawValue: slot)!)
            for (entry, changes) in zip(read.entries, read.changes) {
                newestRead[slot] = entry.id
                if let changes {
                    for change in changes { entries.append(LoggedLikeChange(log: log, slot: slot, entryID: entry.id, change: change)) }
                } else {
                    malformed.append((slot, entry))
                }
            }
            readCounts[slot] = (read.entries.count, read.changeCount)
        }
    }

    /// Leaves `slots` out of what is applied and trimmed (another node owns them now).
    mutating func leaveOut(_ slots: Set<UInt16>) {
        guard !slots.isEmpty else { return }
        stale.formUnion(slots)
        for slot in slots { newestRead[slot] = nil }
        entries.removeAll { slots.contains($0.slot) }
    }

    /// The transaction to run now.
    var transaction: FlushTransaction {
        FlushTransaction(
            entries: entries, epochs: epochs.filter { !stale.contains($0.key) }, skipping: knownRejected,
            knownMissing: knownMissing)
    }

    /// The dead letters of `rejected`: one per change, each naming its entry (only the last
    /// change per pair and kind in the run was sent), leaving out pairs already dead-lettered;
    /// their pairs are added to `knownRejected`. A pair's kinds are refused together (a switch
    /// of kinds is two changes of one pair): each is a letter of its own, or the switch's other
    /// half would be lost.
    mutating func letters(rejected: [RejectedLikeChange]) -> [DeadLetter] {
        var lastEntry: [ReactionKey: LoggedLikeChange] = [:]
        for entry in entries { lastEntry[ReactionKey(entry.change)] = entry }
        let known = knownRejected
        var lettered: Set<ReactionKey> = []
        let letters = rejected.compactMap { rejected -> DeadLetter? in
            let key = ReactionKey(rejected.change)
            guard !known.contains(key.pair), lettered.insert(key).inserted, let entry = lastEntry[key] else { return nil }
            // The refused change carries its time: the logged apply gave every change its own.
            return DeadLetter(
                slot: entry.slot, entryID: entry.entryID, change: rejected.change,
                refusal: (rejected.sqlState, rejected.message))
        }
        knownRejected.formUnion(rejected.map { LikePair($0.change) })
        return letters
    }

    /// The dead letters of the changes to `posts` (found missing), which join `knownMissing`.
    mutating func letters(missing posts: Set<Int64>) -> [DeadLetter] {
        knownMissing.formUnion(posts)
        return entries.filter { posts.contains($0.change.postID) }
            .map { DeadLetter(slot: $0.slot, entryID: $0.entryID, change: $0.timedChange) }
    }
}

/// What a flush read of one slot's log.
struct LogRead: Sendable {
    var entries: [StreamEntry] = []
    /// Per entry, its changes (`nil`: malformed).
    var changes: [[LikeChange]?] = []
    /// Changes read (a malformed entry counts one).
    var changeCount = 0
    /// Whether the read stopped at its budget rather than at the log's end.
    var mayHaveMore = false

    /// Most entries one Redis command returns: Redis is single-threaded, and one huge `XRANGE`
    /// makes every shard's round trip wait behind it.
    static let slice = 500

    /// How many entries the next slice asks for: enough, at the changes per entry seen so far,
    /// to reach `changesPerSlot` (64 at most before any is seen: one round trip for a quiet
    /// slot's small entries; what a slice of big ones brings past the budget is left in the
    /// log), at most `slice`.
    func nextSliceSize(changesPerSlot: Int) -> Int {
        let wanted = max(1, changesPerSlot - changeCount)
        guard !entries.isEmpty else { return min(64, wanted, Self.slice) }
        let perEntry = max(1, changeCount / entries.count)
        return max(1, min(Self.slice, (wanted + perEntry - 1) / perEntry))
    }

    /// Takes in one slice, whole entries up to the budget (what a slice read beyond it is left
    /// for the next flush: the trim stops at the last entry kept).
    /// - Returns: whether to read another slice.
    mutating func take(_ slice: [StreamEntry], asked: Int, changesPerSlot: Int) -> Bool {
        for entry in slice {
            let decoded = ChangeLogEntry.changes(from: entry)
            entries.append(entry)
            changes.append(decoded)
            changeCount += decoded?.count ?? 1
            if changeCount >= changesPerSlot {
                mayHaveMore = true
                return false
            }
        }
        return slice.count == asked
    }
}

/// The flush transaction to run: its entries, the epochs PostgreSQL must still give their
/// slots, the pairs already dead-lettered as refused (not sent) and the posts already known
/// missing (their changes are dead letters: the transaction commits without them).
struct FlushTransaction: Sendable {
    let entries: [LoggedLikeChange]
    let epochs: [UInt16: Int64]
    let skipping: Set<LikePair>
    let knownMissing: Set<Int64>

    /// How one try of the transaction ended: committed, or rolled back with what it found.
    enum Outcome: Sendable {
        /// Applied, with its progress recorded, at `at`.
        case committed(at: Date)
        /// Rolled back: PostgreSQL gives these slots to another owner.
        case staleSlots([UInt16])
        /// Rolled back: these posts do not exist (their changes have no dead letters yet).
        case missingPosts(Set<Int64>)
        /// Rolled back: PostgreSQL refused these changes on their own.
        case refused([RejectedLikeChange])
        /// PostgreSQL failed (transiently): the whole flush is tried again later.
        case failed(Error)
    }
}
