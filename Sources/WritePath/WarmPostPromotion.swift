import Persistence
import PostgresDriver
import RedisDriver
import ShardRouter

/// Promotes a warm post: loads its likers from PostgreSQL into Redis page by page, off the
/// shard's batches (which go on answering it warm): a cursor reads `hydrationPageSize` likers at a time and each page is added to a
/// loading set of this attempt's own (`RedisKeyLayout.loadingLikers`), so memory holds one page,
/// not the post. The shard then publishes the set — one script checks the slot's epoch and that
/// the set is whole, lays the warm hash over it and checks the count, replaces the likers set
/// with it, drops the hash and sets the marker — between its batches
/// (`publish`), so no batch ever sees part of the likers. The pages need no fence: the loading
/// set is this attempt's alone, and only the publication makes it count.
///
/// With other kinds than `like`, the same snapshot also loads each user's other kinds into a
/// loading hash of the attempt's own (`RedisKeyLayout.loadingReactions`), which the publication
/// lays the warm hash's kinds over, checks against the post's counts of each kind, and makes the
/// post's hash of other kinds (`PostHydration.publishWithReactionsScript`).
struct WarmPostPromotion: Sendable {
    let post: Int64
    let pool: PostgresPool
    let redis: RedisClient
    let layout: RedisKeyLayout
    let pageSize: Int
    /// The loading set of this attempt.
    let loading: String
    /// With reactions of other kinds, the loading hash of this attempt; `nil` with likes only.
    let loadingReactions: String?

    init(post: Int64, pool: PostgresPool, redis: RedisClient, layout: RedisKeyLayout, pageSize: Int, reactions: Bool = false) {
        self.post = post
        self.pool = pool
        self.redis = redis
        self.layout = layout
        self.pageSize = pageSize
        let attempt = UInt64.random(in: 1...UInt64.max)
        self.loading = layout.loadingLikers(ofPost: post, attempt: attempt)
        self.loadingReactions = reactions ? layout.loadingReactions(ofPost: post, attempt: attempt) : nil
    }

    /// Reads every liker of the post in one snapshot and adds them to the loading set. While a
    /// page is written to Redis the next one is read from PostgreSQL.
    /// - Returns: how many likers were loaded.
    /// - Throws: PostgreSQL's or Redis's error (the loading set is then deleted, best effort).
    func load() async throws -> Int {
        do {
            return try await pool.withConnection { connection in
                try await connection.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                do {
                    try await connection.query(PostHydration.declareLikersCursor, [.int64(post)])
                    let loaded = try await loadPages(from: connection)
                    if let loadingReactions {
                        try await connection.query(PostHydration.declareReactorsCursor, [.int64(post)])
                        try await loadReactorPages(from: connection, into: loadingReactions)
                    }
                    try await connection.query("COMMIT")
                    return loaded
                } catch {
                    _ = try? await connection.query("ROLLBACK")
                    throw error
                }
            }
        } catch {
            await discard()
            throw error
        }
    }

    /// Fetches pages from the cursor and adds each to the loading set, one page written while
    /// the next is read (at most one write in flight, a child of this call). A cancelled load
    /// stops between pages.
    private func loadPages(from connection: PostgresConnection) async throws -> Int {
        try await withThrowingTaskGroup(of: Void.self) { writes in
            var loaded = 0
            while true {
                try Task.checkCancellation()
                let rows = try await connection.query(PostHydration.fetchLikers(pageSize: pageSize))
                var users: [Int64] = []
                users.reserveCapacity(rows.count)
                for row in rows { users.append(try row.int64(0)) }
                // The page before must be in before this one goes (and before the end).
                try await writes.next()
                if users.isEmpty { break }
                loaded += users.count
                let page = PostHydration.loadingPage(users, post: post, loading: loading)
                let redis = self.redis
                writes.addTask { try Self.check(await redis.execute([page]).first) }
                if users.count < pageSize { break }
            }
            try await writes.waitForAll()
            return loaded
        }
    }

    /// Fetches pages of the users holding other kinds from their cursor into the loading hash,
    /// one page written while the next is read.
    private func loadReactorPages(from connection: PostgresConnection, into key: String) async throws {
        try await withThrowingTaskGroup(of: Void.self) { writes in
            while true {
                try Task.checkCancellation()
                let rows = try await connection.query(PostHydration.fetchReactors(pageSize: pageSize))
                var reactors: [(user: Int64, kinds: String)] = []
                reactors.reserveCapacity(rows.count)
                for row in rows { reactors.append((try row.int64(0), row.string(1) ?? "")) }
                try await writes.next()
                if reactors.isEmpty { break }
                let page = PostHydration.loadingReactionsPage(reactors, post: post, loading: key)
                let redis = self.redis
                writes.addTask { try Self.check(await redis.execute([page]).first) }
                if reactors.count < pageSize { break }
            }
            try await writes.waitForAll()
        }
    }

    /// Deletes the loading set and hash (best effort: they expire anyway).
    func discard() async {
        _ = await redis.execute([SlotCommands(slot: HashSlot(post: post), commands: [.del([loading] + (loadingReactions.map { [$0] } ?? []))])])
    }

    /// Lays the warm post's hash over the `loaded` likers gathered by `load()`, makes the result
    /// its likers set and marks the post hot, all or nothing (`PostHydration.publishScript`):
    /// only while the slot's epoch is still `epoch` (the one held when the batch that started
    /// the promotion began; `nil` for a sole writer, unfenced), the post is still warm, the
    /// loading set holds all it should and the result holds the hash's count. Call from the
    /// shard, between batches.
    /// - Throws: `RedisError(.fenced)` when the slot has another owner now, Redis's error
    ///   otherwise; the post is unchanged either way (the loading set may have the hash laid
    ///   over it: discard it).
    func publish(loaded: Int, epoch: Int64?) async throws {
        let group = PostHydration.publishing(
            post: post, loading: loading, loadingReactions: loadingReactions, loaded: loaded, epoch: epoch, layout: layout)
        let replies = try await redis.execute([group]).first!.get()
        if case .error(let text)? = replies.first, text.hasPrefix("FENCED") { throw RedisError(code: .fenced, message: text) }
        _ = try replies.first?.throwingServerError()
    }

    private static func check(_ result: Result<[RedisReply], RedisError>?) throws {
        guard let result else { throw RedisError(code: .unexpectedReply, message: "no reply to a hydration page") }
        for reply in try result.get() { _ = try reply.throwingServerError() }
    }
}
