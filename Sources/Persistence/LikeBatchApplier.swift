import CounterCore
import PostgresDriver
import RedisDriver

/// Applies a batch of like changes to PostgreSQL: the write-behind flusher's core. The batch is
/// reduced to the last change per (user, post) here, in log order; the posts it names are locked
/// against deletion (`FOR KEY SHARE`, one index probe per distinct post) and those that do not
/// exist are reported and left out; then one statement inserts the likes (a row that exists
/// keeps its place, taking the like's time when later), deletes the unlikes, and moves each post's `likes_count` by exactly the rows that
/// changed. Applying the same batch again therefore changes nothing.
public enum LikeBatchApplier {
    /// Most changes one batch may carry. Larger batches are refused rather than sent.
    public static let maximumBatchSize = 1_000_000

    /// Locks the posts of `$1` (distinct ids, ascending) against deletion for the transaction
    /// and returns those that exist.
    static let presentPostsQuery = "SELECT id FROM posts WHERE id = ANY($1::bigint[]) ORDER BY id FOR KEY SHARE"

    /// The batch-apply statement. Parameters: `$1`/`$2` users and posts to like, `$5` when each
    /// like was acknowledged (Unix milliseconds; `0`: unknown, the transaction's time) — a new
    /// row's `created_at` and `updated_at` —, `$3`/`$4` users and posts to unlike, as parallel
    /// arrays; every pair at most once in all, every post existing (and locked). Returns, per post
    /// whose count moved: its id, the step, the new count.
    ///
    /// Without `onConflict` a like whose row exists already fails the statement (`23505`): the
    /// common case — a like the node decided is new — skips `ON CONFLICT`'s speculative insertion
    /// (about 1.5 µs per row here), and the rare batch with a row PostgreSQL has (after a Redis
    /// failover lost a change, or a row made by hand) is applied again with it.
    ///
    /// With `events`, `$6` is when each unlike was acknowledged (as `$5`), and every row the
    /// statement inserted or deleted also becomes a row of `counter_like_events` (see
    /// `eventsTail`); a like whose row existed already, or an unlike of a row that did not,
    /// changed nothing and makes no event.
    static func statement(onConflict: Bool, events: Bool) -> String {
        switch (onConflict, events) {
        case (false, false): return statementPlain
        case (true, false): return statementOnConflict
        case (false, true): return statementPlainWithEvents
        case (true, true): return statementOnConflictWithEvents
        }
    }

    private static let plainInsert = "RETURNING user_id, post_id, true AS fresh"
    /// A like whose row exists takes the like's time when it is later than the row's: a like
    /// after an unlike of the same pair that one batch coalesced away is a new like, and its
    /// time must not depend on where a flush cut the log (the lists order by it). Only rows
    /// inserted (`xmax = 0`: not a row this statement updated) move the count.
    private static let conflictingInsert = """
        ON CONFLICT (user_id, post_id) DO UPDATE SET created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at
            WHERE likes.created_at IS NULL OR likes.created_at < EXCLUDED.created_at
        RETURNING likes.user_id, likes.post_id, (likes.xmax = 0) AS fresh
        """
    private static let statementPlain = statementText(onConflict: plainInsert, events: false)
    private static let statementOnConflict = statementText(onConflict: conflictingInsert, events: false)
    private static let statementPlainWithEvents = statementText(onConflict: plainInsert, events: true)
    private static let statementOnConflictWithEvents = statementText(onConflict: conflictingInsert, events: true)

    /// The events' part of the statement: the rows that changed (`changed`), ids from the clock
    /// (`clock`, whose row lock is taken here and held until the transaction ends), and their
    /// insertion. The clock waits for `counted` and runs after the statement's main query, so the
    /// lock is taken once every other row of the flush is written: only the events' insertion
    /// and the commit happen under it (the logs' progress is written before), and commits of
    /// flushes that made events are serialized by it — which is what makes ids follow commit
    /// order. (A batch bisected for refused changes holds it from its first applied half on.)
    /// Within one transaction, ids follow the changes' acknowledgement times.
    private static let eventsTail = """
        ,
        changed AS (
            -- A like's time from the batch, not from the row: an app's created_at may keep whole seconds only.
            SELECT i.post_id, i.user_id, true AS liked,
                   CASE WHEN c.ms > 0 THEN 'epoch'::timestamptz + c.ms * interval '1 millisecond' ELSE now() END AS at
            FROM inserted i JOIN unnest($1::bigint[], $2::bigint[], $5::bigint[]) AS c(user_id, post_id, ms)
                ON c.user_id = i.user_id AND c.post_id = i.post_id
            WHERE i.fresh
            UNION ALL
            SELECT post_id, user_id, false, CASE WHEN ms > 0 THEN 'epoch'::timestamptz + ms * interval '1 millisecond' ELSE now() END
            FROM deleted
        ),
        clock AS (
            UPDATE counter_event_clock SET last_id = last_id + (SELECT count(*) FROM changed)
            WHERE (SELECT count(*) FROM counted) >= 0 AND EXISTS (SELECT 1 FROM changed)
            RETURNING last_id - (SELECT count(*) FROM changed) AS before_first
        ),
        events AS (
            INSERT INTO counter_like_events (id, post_id, user_id, liked, liked_at)
            SELECT clock.before_first + row_number() OVER (ORDER BY changed.at, changed.post_id, changed.user_id),
                   changed.post_id, changed.user_id, changed.liked, changed.at
            FROM changed, clock
        )
        """

    private static func statementText(onConflict: String, events: Bool) -> String {
        """
        WITH inserted AS (
            INSERT INTO likes (user_id, post_id, created_at, updated_at)
            SELECT user_id, post_id, at, at FROM (
                SELECT user_id, post_id, CASE WHEN ms > 0 THEN 'epoch'::timestamptz + ms * interval '1 millisecond' ELSE now() END AS at
                FROM unnest($1::bigint[], $2::bigint[], $5::bigint[]) AS c(user_id, post_id, ms)
            ) c
            \(onConflict)
        ),
        deleted AS (
            DELETE FROM likes l USING unnest($3::bigint[], $4::bigint[]\(events ? ", $6::bigint[]" : "")) AS c(user_id, post_id\(events ? ", ms" : ""))
            WHERE l.user_id = c.user_id AND l.post_id = c.post_id
            RETURNING l.post_id, l.user_id\(events ? ", c.ms" : "")
        ),
        delta AS (
            SELECT post_id, sum(step) AS step FROM (
                SELECT post_id, 1 AS step FROM inserted WHERE fresh
                UNION ALL
                SELECT post_id, -1 AS step FROM deleted
            ) steps
            GROUP BY post_id
            HAVING sum(step) <> 0
        ),
        counted AS (
            UPDATE posts p SET likes_count = p.likes_count + delta.step
            FROM delta WHERE p.id = delta.post_id
            RETURNING p.id, delta.step, p.likes_count
        )\(events ? eventsTail : "")
        SELECT id, step, likes_count FROM counted
        """
    }

    /// The last change per (user, post, kind) of `changes` (in log order), with its time,
    /// ordered by post, user, then kind (so the inserts walk the indexes in order, and a pair's
    /// kinds are neighbours).
    static func lastChanges(_ changes: [LikeChange]) -> [LikeChange] {
        var last: [ReactionKey: LikeChange] = [:]
        last.reserveCapacity(changes.count)
        for change in changes { last[ReactionKey(change)] = change }
        return last.values.sorted { ($0.postID, $0.userID, $0.kind) < ($1.postID, $1.userID, $1.kind) }
    }

    /// Applies `changes` (in log order: a later change to the same pair wins) on `connection`,
    /// inside the transaction the caller holds (the posts stay locked until it ends).
    ///
    /// It runs in a savepoint, first without `ON CONFLICT`; a batch that meets an existing row
    /// rolls back to it and runs again with `ON CONFLICT … DO UPDATE` of the like's time. The posts are locked
    /// inside the savepoint, by the same subtransaction as the foreign key's checks: a lock the
    /// outer transaction took would make every check of the hot post's row look up a multixact
    /// (13 % of PostgreSQL's time in `GetMultiXactIdMembers`, measured).
    ///
    /// With `isolatingRefusals`, a batch PostgreSQL refuses for what it carries
    /// (`PostgresError.isRefusal`: a trigger that raises, a check constraint, a value out of
    /// range, a privilege) is rolled back to its savepoint and split in halves, each applied in a
    /// savepoint of its own, down to the single changes that are refused: those are returned in
    /// `rejected` and the rest is applied, in the caller's transaction still. A batch without
    /// refusals costs nothing more; `k` refused changes among `n` cost about `2k·log₂ n`
    /// statements (every change refused: about `2n`).
    /// - Parameters:
    ///   - skipping: pairs left out (their changes were found refused before): not sent.
    ///   - isolatingRefusals: find and return the refused changes instead of throwing.
    ///   - events: also write a `counter_like_events` row for every like row inserted and every
    ///     one deleted (the outbox), ids from `counter_event_clock`, whose row lock the
    ///     transaction then holds until it ends — and for every `reactions` row, with its kind.
    ///   - oneKindPerUser: the deployment's users hold one kind of a post at most, so a pair
    ///     that lost a kind and gained another in this batch switched kinds: one event says so
    ///     (`kind`, `replaced_kind`), never two.
    /// - Returns: per post, how much `likes_count` moved (and each other kind's count); posts
    ///   that do not exist; the changes refused. A refused pair's changes are refused together,
    ///   so a switch of kinds is applied whole or not at all.
    /// - Throws: `PostgresError(.invalidArgument)` for an empty or oversized batch or an id that
    ///   is not a positive 64-bit integer (nothing is sent); PostgreSQL's errors otherwise (with
    ///   `isolatingRefusals`, only the transient ones and those of the savepoints themselves).
    public static func apply(
        _ changes: [LikeChange], on connection: isolated PostgresConnection,
        skipping: Set<LikePair> = [], isolatingRefusals: Bool = false,
        events: Bool = false, oneKindPerUser: Bool = false
    ) throws(PostgresError) -> LikeBatchOutcome {
        try validate(changes)
        var last = lastChanges(changes)
        if !skipping.isEmpty { last.removeAll { skipping.contains(LikePair($0)) } }
        guard !last.isEmpty else { return .empty }
        let shape = Shape(events: events, oneKindPerUser: oneKindPerUser)
        return isolatingRefusals
            ? try applyIsolating(last, shape: shape, on: connection)
            : try applyInSavepoint(last, shape: shape, on: connection)
    }

    /// What the statement writes besides the changes.
    struct Shape {
        let events: Bool
        let oneKindPerUser: Bool
    }

    /// Applies `last` in a savepoint, first without `ON CONFLICT`, then (after a unique
    /// violation) with it. A failure leaves the savepoint to roll back to.
    private static func applyInSavepoint(_ last: [LikeChange], shape: Shape, on connection: isolated PostgresConnection) throws(PostgresError)
        -> LikeBatchOutcome
    {
        try connection.query("SAVEPOINT counter_batch_apply")
        do {
            return try apply(last: last, onConflict: false, shape: shape, on: connection)
        } catch  where error.isUniqueViolation {
            try connection.query("ROLLBACK TO SAVEPOINT counter_batch_apply")
            return try apply(last: last, onConflict: true, shape: shape, on: connection)
        }
    }

    /// `applyInSavepoint`, bisecting what PostgreSQL refuses down to the single changes refused.
    private static func applyIsolating(_ last: [LikeChange], shape: Shape, on connection: isolated PostgresConnection) throws(PostgresError)
        -> LikeBatchOutcome
    {
        do {
            return try applyInSavepoint(last, shape: shape, on: connection)
        } catch  where error.isRefusal {
            // The savepoint taken last is this attempt's: rolling back to it keeps what earlier
            // parts applied and makes the transaction usable again.
            try connection.query("ROLLBACK TO SAVEPOINT counter_batch_apply")
            guard let middle = pairBoundary(nearMiddleOf: last) else {
                var outcome = LikeBatchOutcome.empty
                outcome.rejected = last.map { RejectedLikeChange(change: $0, error: error) }
                return outcome
            }
            let first = try applyIsolating(Array(last[..<middle]), shape: shape, on: connection)
            let second = try applyIsolating(Array(last[middle...]), shape: shape, on: connection)
            return first.merged(with: second)
        }
    }

    /// Where `last` (sorted by post, then user) splits in two nearest its middle without
    /// parting a pair's kinds; `nil` when it holds one pair only.
    package static func pairBoundary(nearMiddleOf last: [LikeChange]) -> Int? {
        guard last.count > 1 else { return nil }
        func splitsPair(_ index: Int) -> Bool { LikePair(last[index - 1]) == LikePair(last[index]) }
        let middle = last.count / 2
        var later = middle
        while later < last.count && splitsPair(later) { later += 1 }
        if later < last.count { return later }
        var earlier = middle
        while earlier > 0 && splitsPair(earlier) { earlier -= 1 }
        return earlier > 0 ? earlier : nil
    }

    /// Locks and finds the posts of `last` (one change per pair and kind, by post), then applies
    /// the changes of those that exist: likes by the likes' statement, and a batch with other
    /// kinds by the statement that writes both (`ReactionStatement`).
    private static func apply(
        last: [LikeChange], onConflict: Bool, shape: Shape,
        on connection: isolated PostgresConnection
    ) throws(PostgresError) -> LikeBatchOutcome {
        var posts: [Int64] = []
        for change in last where posts.last != change.postID { posts.append(change.postID) }
        var present: Set<Int64> = []
        for row in try connection.query(presentPostsQuery, [.int64Array(posts)]) { present.insert(try row.int64(0)) }
        var missing: [Int64: Int] = [:]
        var liked = ChangeColumns()
        var unliked = ChangeColumns()
        var reacted = ChangeColumns()
        var unreacted = ChangeColumns()
        for change in last {
            if !present.contains(change.postID) {
                missing[change.postID, default: 0] += 1
            } else if change.kind.isLike {
                if change.liked { liked.append(change) } else { unliked.append(change) }
            } else {
                if change.liked { reacted.append(change) } else { unreacted.append(change) }
            }
        }
        var movements: [Int64: LikeBatchOutcome.CountMovement] = [:]
        var reactionMovements: [PostKind: LikeBatchOutcome.CountMovement] = [:]
        if !reacted.isEmpty || !unreacted.isEmpty {
            let parameters: [PostgresValue] =
                liked.parameters(kinds: false) + unliked.parameters(kinds: false)
                + reacted.parameters(kinds: true) + unreacted.parameters(kinds: true)
            let statement = ReactionStatement.text(
                onConflict: onConflict, events: shape.events, oneKindPerUser: shape.oneKindPerUser)
            for row in try connection.query(statement, parameters) {
                let movement = LikeBatchOutcome.CountMovement(delta: try row.int64(2), likesCount: try row.int64(3))
                if let name = row.string(1), let kind = ReactionKind(name) {
                    reactionMovements[PostKind(postID: try row.int64(0), kind: kind)] = movement
                } else {
                    movements[try row.int64(0)] = movement
                }
            }
        } else if !liked.isEmpty || !unliked.isEmpty {
            var parameters: [PostgresValue] = [
                .int64Array(liked.users), .int64Array(liked.posts), .int64Array(unliked.users), .int64Array(unliked.posts),
                .int64Array(liked.times),
            ]
            if shape.events { parameters.append(.int64Array(unliked.times)) }
            let rows = try connection.query(statement(onConflict: onConflict, events: shape.events), parameters)
            for row in rows {
                movements[try row.int64(0)] = .init(delta: try row.int64(1), likesCount: try row.int64(2))
            }
        }
        var outcome = LikeBatchOutcome(movements: movements, missingPosts: missing, coalescedChanges: last.count, alreadyApplied: 0)
        outcome.reactionMovements = reactionMovements
        return outcome
    }

    /// Changes as the parallel arrays a statement takes.
    struct ChangeColumns {
        var users: [Int64] = []
        var posts: [Int64] = []
        var kinds: [String] = []
        /// When each was acknowledged (Unix milliseconds; `0`: the transaction's time).
        var times: [Int64] = []

        var isEmpty: Bool { users.isEmpty }

        mutating func append(_ change: LikeChange) {
            users.append(change.userID)
            posts.append(change.postID)
            kinds.append(change.kind.name)
            times.append(change.acknowledgedAt ?? 0)
        }

        /// Users, posts, (kinds,) times.
        func parameters(kinds withKinds: Bool) -> [PostgresValue] {
            withKinds
                ? [.int64Array(users), .int64Array(posts), .textArray(kinds), .int64Array(times)]
                : [.int64Array(users), .int64Array(posts), .int64Array(times)]
        }
    }

    /// `apply(_:on:)` in a transaction of its own on a pooled connection.
    public static func apply(
        _ changes: [LikeChange], pool: PostgresPool, events: Bool = false, oneKindPerUser: Bool = false
    ) async throws -> LikeBatchOutcome {
        try await pool.withTransaction { connection in
            try apply(changes, on: connection, events: events, oneKindPerUser: oneKindPerUser)
        }
    }

    /// Applies the entries that are newer than the progress recorded for their log, and records
    /// each log's newest entry as its new progress, all in one transaction. Entries at or below
    /// the recorded progress are skipped: after a crash between the commit and trimming the log,
    /// re-reading the log applies nothing twice. Entries may come from several logs.
    public static func apply(
        _ entries: [LoggedLikeChange], pool: PostgresPool, events: Bool = false, oneKindPerUser: Bool = false
    ) async throws -> LikeBatchOutcome {
        try await pool.withTransaction { connection in
            try apply(entries, on: connection, events: events, oneKindPerUser: oneKindPerUser)
        }
    }

    /// `apply(_:pool:)` inside the caller's transaction on `connection`.
    /// - Parameters:
    ///   - audit: run last, on the entries applied (`FlushAudit`); `nil`: none.
    ///   - skipping, isolatingRefusals, events: as for a batch of changes; the progress of every
    ///     log still moves past all of `entries`, the skipped and refused ones included (the
    ///     caller keeps those elsewhere, as dead letters, before it commits). The progress is
    ///     written before the changes, so that with `events` the event clock's lock, taken by
    ///     the changes' statement, is held through as little as possible before the commit.
    package static func apply(
        _ entries: [LoggedLikeChange], on connection: isolated PostgresConnection,
        audit: FlushAudit? = nil, skipping: Set<LikePair> = [],
        isolatingRefusals: Bool = false, events: Bool = false, oneKindPerUser: Bool = false
    ) throws(PostgresError) -> LikeBatchOutcome {
        try validate(entries.map(\.change))
        // Every log's newest entry and its changes, whether or not PostgreSQL has them already:
        // the upsert below moves a log's progress only forward and says what it replaced.
        var newest: [String: (id: StreamEntryID, count: Int64)] = [:]
        for entry in entries {
            let current = newest[entry.log]
            newest[entry.log] = (max(current?.id ?? entry.entryID, entry.entryID), (current?.count ?? 0) + 1)
        }
        let updated = newest.sorted { $0.key < $1.key }
        let replaced = try connection.query(
            progressUpsert,
            [
                .textArray(updated.map(\.key)),
                .int64Array(updated.map { Int64($0.value.id.milliseconds) }),
                .int64Array(updated.map { Int64($0.value.id.sequence) }),
                .int64Array(updated.map(\.value.count)),
            ])
        // A log the upsert moved: its entries after the progress it replaced are new (all of them
        // for a log without one). A log it left alone had nothing newer: all of it is applied.
        var before: [String: StreamEntryID?] = [:]
        for row in replaced {
            var previous: StreamEntryID?
            if let milliseconds = try row.optionalInt64(1) {
                previous = StreamEntryID(milliseconds: UInt64(milliseconds), sequence: UInt64(try row.optionalInt64(2) ?? 0))
            }
            before[row.string(0) ?? ""] = .some(previous)
        }
        var staleInMoved: [String: Int64] = [:]
        let fresh = entries.filter { entry in
            guard let previous = before[entry.log] else { return false }
            guard let previous, entry.entryID <= previous else { return true }
            staleInMoved[entry.log, default: 0] += 1
            return false
        }
        let skipped = entries.count - fresh.count
        if !staleInMoved.isEmpty {
            // Re-read entries among new ones (a crash came between a commit and its log's trim):
            // the progress counts only the changes applied now.
            let corrected = staleInMoved.sorted { $0.key < $1.key }
            try connection.query(
                """
                UPDATE counter_flush_progress p SET applied_changes = p.applied_changes - u.n
                FROM unnest($1::text[], $2::bigint[]) AS u(log, n) WHERE p.log = u.log
                """,
                [.textArray(corrected.map(\.key)), .int64Array(corrected.map(\.value))])
        }
        guard !fresh.isEmpty else {
            return LikeBatchOutcome(movements: [:], missingPosts: [:], coalescedChanges: 0, alreadyApplied: skipped)
        }
        var appliedThrough: [String: StreamEntryID] = [:]
        for entry in fresh { appliedThrough[entry.log] = max(appliedThrough[entry.log] ?? entry.entryID, entry.entryID) }
        // A change's time is its acknowledgement: its own, or else its entry's (the stream id).
        let outcome = try apply(
            fresh.map(\.timedChange), on: connection, skipping: skipping, isolatingRefusals: isolatingRefusals,
            events: events, oneKindPerUser: oneKindPerUser)
        try audit?.check(fresh, on: connection)
        var result = LikeBatchOutcome(
            movements: outcome.movements, missingPosts: outcome.missingPosts,
            coalescedChanges: outcome.coalescedChanges, alreadyApplied: skipped)
        result.appliedThrough = appliedThrough
        result.rejected = outcome.rejected
        result.reactionMovements = outcome.reactionMovements
        return result
    }

    /// Records each log's newest entry as its progress (`$1` logs, `$2`/`$3` the entries' ids,
    /// `$4` their changes), only where it is newer than the recorded one, and returns, per log it
    /// moved, the progress it replaced (`NULL` for a log without one). The row lock the update
    /// takes holds until the transaction ends, and the replaced progress is the latest committed
    /// one (an upsert reads the row it updates afresh, after waiting for a concurrent writer):
    /// one statement and one lock per log, where a `SELECT … FOR UPDATE` then an upsert took two.
    static let progressUpsert = """
        INSERT INTO counter_flush_progress AS p (log, last_entry_ms, last_entry_seq, applied_changes, applied_batches)
        SELECT log, ms, seq, n, 1 FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[]) AS u(log, ms, seq, n)
        ON CONFLICT (log) DO UPDATE SET
            previous_entry_ms = p.last_entry_ms, previous_entry_seq = p.last_entry_seq,
            last_entry_ms = excluded.last_entry_ms, last_entry_seq = excluded.last_entry_seq,
            applied_changes = p.applied_changes + excluded.applied_changes,
            applied_batches = p.applied_batches + 1, updated_at = now()
        WHERE (excluded.last_entry_ms, excluded.last_entry_seq) > (p.last_entry_ms, p.last_entry_seq)
        RETURNING p.log, p.previous_entry_ms, p.previous_entry_seq
        """

    /// The progress recorded for `log`, if any batch of it was applied.
    public static func progress(of log: String, pool: PostgresPool) async throws -> StreamEntryID? {
        let rows = try await pool.query(
            "SELECT last_entry_ms, last_entry_seq FROM counter_flush_progress WHERE log = $1", [.text(log)])
        guard let row = rows.first else { return nil }
        return StreamEntryID(milliseconds: UInt64(try row.int64(0)), sequence: UInt64(try row.int64(1)))
    }

    static func validate(_ changes: [LikeChange]) throws(PostgresError) {
        guard !changes.isEmpty else {
            throw PostgresError(code: .invalidArgument, message: "empty batch: give at least one change")
        }
        guard changes.count <= maximumBatchSize else {
            throw PostgresError(
                code: .invalidArgument,
                message: "batch of \(changes.count) changes exceeds the limit of \(maximumBatchSize); split it")
        }
        if let index = changes.firstIndex(where: { $0.userID <= 0 || $0.postID <= 0 }) {
            let change = changes[index]
            throw PostgresError(
                code: .invalidArgument,
                message: "change \(index) has user \(change.userID), post \(change.postID): ids must be positive 64-bit integers")
        }
    }
}
