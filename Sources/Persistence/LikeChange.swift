import CounterCore
import PostgresDriver
import RedisDriver

/// A requested membership state: user `userID` holds (`liked == true`) or does not hold the
/// reaction `kind` on post `postID` — for `like`, the kind every deployment has, likes it or
/// not. Changes carry the wanted state, not a toggle, so applying one twice is harmless.
public struct LikeChange: Sendable, Hashable {
    public let userID: Int64
    public let postID: Int64
    /// The reaction's kind: `like` (a `likes` row), or another (a `reactions` row).
    public let kind: ReactionKind
    public let liked: Bool
    /// When the change was acknowledged, in Unix milliseconds, when it is not the time of the
    /// log entry that holds it (a dead letter replayed keeps its first acknowledgement's time);
    /// `nil`: the entry's own time (a stream id is the time Redis appended it), which is when a
    /// change written by its batch was acknowledged.
    public let acknowledgedAt: Int64?

    public init(userID: Int64, postID: Int64, kind: ReactionKind = .like, liked: Bool, acknowledgedAt: Int64? = nil) {
        self.userID = userID
        self.postID = postID
        self.kind = kind
        self.liked = liked
        self.acknowledgedAt = acknowledgedAt
    }

    /// The times a like can have, in Unix milliseconds: from 1970 to the last millisecond of
    /// year 9999 (what RFC 3339's four-digit years and PostgreSQL's `timestamptz` both hold).
    /// A time from outside (a dead letter's `t`, a peer's answer) is refused outside it, so no
    /// conversion of a like's time can overflow.
    public static let acknowledgementRange: ClosedRange<Int64> = 0...253_402_300_799_999

    /// The time of a change logged in an entry of Unix milliseconds `entryMilliseconds`: its
    /// own (`acknowledgedAt`), else the entry's, kept within `acknowledgementRange`.
    public func acknowledgedAt(inEntryOf entryMilliseconds: UInt64) -> Int64 {
        acknowledgedAt ?? min(Int64(clamping: entryMilliseconds), Self.acknowledgementRange.upperBound)
    }
}

/// A `LikeChange` with its position in a write-behind log: the log's name (its Redis stream
/// key), the hash slot the log belongs to, and the entry's id there.
public struct LoggedLikeChange: Sendable, Hashable {
    /// The log's Redis stream key; also the key of its row in `counter_flush_progress`.
    public let log: String
    /// The hash slot whose log this is, carried as a value so no one parses it back out of `log`.
    public let slot: UInt16
    public let entryID: StreamEntryID
    public let change: LikeChange

    public init(log: String, slot: UInt16, entryID: StreamEntryID, change: LikeChange) {
        self.log = log
        self.slot = slot
        self.entryID = entryID
        self.change = change
    }

    /// When the change was acknowledged (Unix milliseconds): its own time, or else its entry's.
    public var acknowledgedAt: Int64 { change.acknowledgedAt(inEntryOf: entryID.milliseconds) }

    /// The change with that time: what the flusher applies and a dead letter keeps.
    public var timedChange: LikeChange {
        change.acknowledgedAt != nil
            ? change
            : LikeChange(
                userID: change.userID, postID: change.postID, kind: change.kind, liked: change.liked,
                acknowledgedAt: acknowledgedAt)
    }
}

/// A (user, post) pair: what one membership is about.
public struct LikePair: Sendable, Hashable {
    public let userID: Int64
    public let postID: Int64

    public init(userID: Int64, postID: Int64) {
        self.userID = userID
        self.postID = postID
    }

    public init(_ change: LikeChange) {
        self.init(userID: change.userID, postID: change.postID)
    }
}

/// One membership of one kind: user, post and reaction kind. The last change per key is what a
/// batch applies.
public struct ReactionKey: Sendable, Hashable {
    public let userID: Int64
    public let postID: Int64
    public let kind: ReactionKind

    public init(userID: Int64, postID: Int64, kind: ReactionKind) {
        self.userID = userID
        self.postID = postID
        self.kind = kind
    }

    public init(_ change: LikeChange) {
        self.init(userID: change.userID, postID: change.postID, kind: change.kind)
    }

    /// The (user, post) pair the key is of.
    public var pair: LikePair { LikePair(userID: userID, postID: postID) }
}

/// A post's count of one kind (`likes_count` for `like`).
public struct PostKind: Sendable, Hashable {
    public let postID: Int64
    public let kind: ReactionKind

    public init(postID: Int64, kind: ReactionKind) {
        self.postID = postID
        self.kind = kind
    }
}

/// A change PostgreSQL refused on its own (`PostgresError.isRefusal`): not applied, while the
/// rest of its batch was.
public struct RejectedLikeChange: Sendable, Equatable {
    public let change: LikeChange
    /// PostgreSQL's SQLSTATE (for example `P0001`, an exception a trigger raised).
    public let sqlState: String
    /// PostgreSQL's message, with its detail line when it sent one.
    public let message: String

    public init(change: LikeChange, sqlState: String, message: String) {
        self.change = change
        self.sqlState = sqlState
        self.message = message
    }

    public init(change: LikeChange, error: PostgresError) {
        self.init(change: change, sqlState: error.sqlState ?? "", message: error.detail.map { "\(error.message) (\($0))" } ?? error.message)
    }
}

/// What applying a batch did to PostgreSQL.
public struct LikeBatchOutcome: Sendable, Equatable {
    /// How one post's `likes_count` moved.
    public struct CountMovement: Sendable, Equatable {
        /// Rows inserted minus rows deleted for the post.
        public let delta: Int64
        /// `likes_count` after the batch.
        public let likesCount: Int64

        public init(delta: Int64, likesCount: Int64) {
            self.delta = delta
            self.likesCount = likesCount
        }
    }

    /// Posts whose `likes_count` moved, by post id. A post whose changes were all already in
    /// place (a like of a liked post) is absent: its count did not move.
    public let movements: [Int64: CountMovement]
    /// The counts of other kinds that moved (`reaction_counts`), by post and kind, as `movements`.
    public var reactionMovements: [PostKind: CountMovement] = [:]
    /// Posts that do not exist in `posts`, with how many of the batch's (coalesced) changes named
    /// each. Their changes were not applied; the rest of the batch was.
    public let missingPosts: [Int64: Int]
    /// Changes left after keeping only the last one per (user, post).
    public let coalescedChanges: Int
    /// Entries skipped because their log's recorded progress showed them applied already
    /// (only for logged batches).
    public let alreadyApplied: Int
    /// The newest entry applied per log (only for logged batches).
    public var appliedThrough: [String: StreamEntryID] = [:]
    /// Changes PostgreSQL refused, each on its own (only when asked to isolate them); the rest
    /// of the batch was applied.
    public var rejected: [RejectedLikeChange] = []

    static let empty = LikeBatchOutcome(movements: [:], missingPosts: [:], coalescedChanges: 0, alreadyApplied: 0)

    /// The outcome of two parts of one batch applied one after the other (disjoint pairs).
    func merged(with later: LikeBatchOutcome) -> LikeBatchOutcome {
        var movements = self.movements
        for (post, movement) in later.movements {
            let delta = (movements[post]?.delta ?? 0) + movement.delta
            movements[post] = CountMovement(delta: delta, likesCount: movement.likesCount)
        }
        var reactionMovements = self.reactionMovements
        for (key, movement) in later.reactionMovements {
            let delta = (reactionMovements[key]?.delta ?? 0) + movement.delta
            reactionMovements[key] = CountMovement(delta: delta, likesCount: movement.likesCount)
        }
        var result = LikeBatchOutcome(
            movements: movements.filter { $0.value.delta != 0 },
            missingPosts: missingPosts.merging(later.missingPosts, uniquingKeysWith: +),
            coalescedChanges: coalescedChanges + later.coalescedChanges,
            alreadyApplied: alreadyApplied + later.alreadyApplied)
        result.rejected = rejected + later.rejected
        result.reactionMovements = reactionMovements.filter { $0.value.delta != 0 }
        return result
    }
}
