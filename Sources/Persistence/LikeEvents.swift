import PostgresDriver

/// The change events' outbox, `counter_like_events`: what the flusher wrote there (with events
/// on, in the same transaction as the `likes` rows they describe), read in id order, and pruned
/// by age. Ids come from `counter_event_clock` in commit order and without gaps (a flush that
/// rolls back takes its ids back with it), so "everything after id N" is a cursor that never
/// skips an event committed later.
public struct LikeEvents: Sendable {
    /// One committed change of `likes`: `post_id`'s like by `user_id` appeared (`liked`) or went.
    public struct Event: Sendable, Equatable {
        public let id: Int64
        public let postID: Int64
        public let userID: Int64
        public let liked: Bool
        /// When the like or unlike was acknowledged to its caller (Unix microseconds).
        public let likedAtMicroseconds: Int64
        /// When the flush transaction that wrote it inserted it, just before its commit (Unix microseconds).
        public let committedAtMicroseconds: Int64
        /// The reaction's kind; `nil` for a like (every event of a deployment of likes only).
        public let kind: String?
        /// For a switch of kinds with one kind per user: the kind the new one replaced.
        public let replacedKind: String?

        public init(
            id: Int64, postID: Int64, userID: Int64, liked: Bool, likedAtMicroseconds: Int64, committedAtMicroseconds: Int64,
            kind: String? = nil, replacedKind: String? = nil
        ) {
            self.id = id
            self.postID = postID
            self.userID = userID
            self.liked = liked
            self.likedAtMicroseconds = likedAtMicroseconds
            self.committedAtMicroseconds = committedAtMicroseconds
            self.kind = kind
            self.replacedKind = replacedKind
        }
    }

    /// The outbox's bookkeeping, one row.
    public struct Clock: Sendable, Equatable {
        /// The newest event's id (0: none yet).
        public let lastID: Int64
        /// Every event up to this id was pruned (0: none).
        public let prunedThrough: Int64
        /// Events pruned since the outbox was made.
        public let prunedEvents: Int64
        /// Events stored: ids are dense, and pruning takes the oldest first.
        public var stored: Int64 { lastID - prunedThrough }

        public init(lastID: Int64, prunedThrough: Int64, prunedEvents: Int64) {
            self.lastID = lastID
            self.prunedThrough = prunedThrough
            self.prunedEvents = prunedEvents
        }
    }

    /// The advisory lock the pruners of all nodes take turns with ("counter_like_events" hashed by hand: any constant no other lock uses).
    static let pruningLockKey: Int64 = 0x636F_756E_7465_7265

    /// The publication of the outbox for logical replication consumers (pgoutput, Debezium).
    public static let publication = "counter_like_events"

    private let pool: PostgresPool

    /// The outbox, read and pruned on `pool`.
    public init(pool: PostgresPool) {
        self.pool = pool
    }

    /// Creates `publication` on `counter_like_events`, inserts only (retention's deletes are not
    /// news), unless it exists. Returns whether it was created, and the server's `wal_level` (a
    /// replication slot needs `logical`).
    public func createPublication() async throws -> (created: Bool, walLevel: String) {
        try await pool.withTransaction { connection in
            let exists = try connection.query("SELECT 1 FROM pg_publication WHERE pubname = $1", [.text(Self.publication)])
            if exists.isEmpty {
                // A name cannot be a parameter; this one is a constant.
                try connection.query("CREATE PUBLICATION \(Self.publication) FOR TABLE counter_like_events WITH (publish = 'insert')")
            }
            let level = try connection.query("SHOW wal_level").first?.string(0) ?? "unknown"
            return (exists.isEmpty, level)
        }
    }

    /// The events after `after`, oldest first, at most `limit`.
    public func read(after: Int64, limit: Int) async throws -> [Event] {
        let rows = try await pool.query(
            """
            SELECT id, post_id, user_id, liked,
                   (extract(epoch FROM liked_at) * 1000000)::bigint, (extract(epoch FROM committed_at) * 1000000)::bigint,
                   kind, replaced_kind
            FROM counter_like_events WHERE id > $1 ORDER BY id LIMIT $2
            """, [.int64(after), .int64(Int64(limit))])
        return try rows.map { row in
            Event(
                id: try row.int64(0), postID: try row.int64(1), userID: try row.int64(2), liked: try row.bool(3),
                likedAtMicroseconds: try row.int64(4), committedAtMicroseconds: try row.int64(5), kind: row.string(6),
                replacedKind: row.string(7))
        }
    }

    /// The clock's row.
    public func clock() async throws -> Clock {
        let rows = try await pool.query("SELECT last_id, pruned_through, pruned_events FROM counter_event_clock")
        guard let row = rows.first else { return Clock(lastID: 0, prunedThrough: 0, prunedEvents: 0) }
        return Clock(lastID: try row.int64(0), prunedThrough: try row.int64(1), prunedEvents: try row.int64(2))
    }

    /// When the oldest event stored was committed (Unix microseconds), or `nil` when none is.
    public func oldestCommittedAt() async throws -> Int64? {
        let rows = try await pool.query(
            """
            SELECT (extract(epoch FROM committed_at) * 1000000)::bigint FROM counter_like_events
            WHERE id > (SELECT pruned_through FROM counter_event_clock) ORDER BY id LIMIT 1
            """)
        return try rows.first.map { try $0.int64(0) }
    }

    /// How long ago, by PostgreSQL's clock, the oldest event stored was committed (seconds; 0
    /// when none is).
    public func oldestAge() async throws -> Double {
        let rows = try await pool.query(
            """
            SELECT coalesce(extract(epoch FROM now() - (
                SELECT committed_at FROM counter_like_events
                WHERE id > (SELECT pruned_through FROM counter_event_clock) ORDER BY id LIMIT 1)), 0)::float8
            """)
        return Double(rows.first?.string(0) ?? "") ?? 0
    }

    /// Deletes, oldest first, at most `batch` events committed more than `age` ago, and moves the
    /// clock's `pruned_through` past them, in one short transaction. The rows are found by the
    /// primary key from the last prune on, and only a prefix of them goes (up to the first one
    /// young enough to keep: `committed_at` grows with the id, as events are inserted under the
    /// clock's lock, but a clock that stepped back must not make a later event go first), so a
    /// consumer behind `pruned_through` has missed exactly what it says. Returns how many went.
    public func prune(olderThan age: Duration, batch: Int) async throws -> Int {
        let milliseconds = age.components.seconds * 1_000 + age.components.attoseconds / 1_000_000_000_000_000
        return try await pool.withTransaction { connection in
            // One pruner at a time among the nodes; the others find the lock taken and skip a turn.
            let turn = try connection.query("SELECT pg_try_advisory_xact_lock($1)", [.int64(Self.pruningLockKey)])
            guard try turn.first?.bool(0) == true else { return 0 }
            let rows = try connection.query(
                """
                WITH oldest AS (
                    SELECT id, committed_at FROM counter_like_events
                    WHERE id > (SELECT pruned_through FROM counter_event_clock)
                    ORDER BY id LIMIT $2
                ),
                bound AS (
                    SELECT coalesce(
                        (SELECT min(id) FROM oldest WHERE committed_at >= now() - $1 * interval '1 millisecond'),
                        (SELECT max(id) + 1 FROM oldest)) AS first_kept
                ),
                deleted AS (
                    DELETE FROM counter_like_events e USING oldest, bound
                    WHERE e.id = oldest.id AND oldest.id < bound.first_kept
                    RETURNING e.id
                )
                UPDATE counter_event_clock SET pruned_through = greatest(pruned_through, (SELECT max(id) FROM deleted)),
                                               pruned_events = pruned_events + (SELECT count(*) FROM deleted)
                WHERE EXISTS (SELECT 1 FROM deleted)
                RETURNING (SELECT count(*) FROM deleted)
                """, [.int64(milliseconds), .int64(Int64(batch))])
            return Int(try rows.first?.int64(0) ?? 0)
        }
    }
}
