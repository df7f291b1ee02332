import Persistence
import ShardRouter

/// Loads one large post's likers from PostgreSQL into Redis page by page, off the shard's
/// batches: a cursor reads `hydrationPageSize` likers at a time and each page is added to a
/// loading set of this attempt's own (`RedisKeyLayout.loadingLikers`), so memory holds one page,
/// not the post. The shard then publishes the set — it replaces the likers set and the marker is
/// set, in one fenced transaction — between its batches (`publish`), so no batch ever sees part
/// of the likers. The pages need no fence: the loading set is this attempt's alone, and only the
/// publication makes it count.
struct LargePostHydration {
    let post: Int64
    let pool: PostgresPool
    let redis: RedisClient
    let layout: RedisKeyLayout
    let pageSize: Int
    /// The loading set of this attempt.
    let loading: String

    init(post: Int64, pool: PostgresPool, redis: RedisClient, layout: RedisKeyLayout, pageSize: Int) {
        self.post = post
        self.pool = pool
        self.redis = redis
        self.layout = layout
        self.pageSize = pageSize
        self.loading = layout.loadingLikers(ofPost: post, attempt: UInt64.random(in: 1...UInt64.max))
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
                    var loaded = 0
                    var writing: Task<Void, Error>?
                    while true {
                        let rows = try await connection.query(PostHydration.fetchLikers(pageSize: pageSize))
                        var users: [Int64] = []
                        users.reserveCapacity(rows.count)
                        for row in rows { users.append(try row.int64(0)) }
                        // The page before must be in before this one goes (and before the end).
                        try await writing?.value
                        writing = nil
                        if users.isEmpty { break }
                        loaded += users.count
                        let page = PostHydration.loadingPage(users, post: post, loading: loading)
                        let redis = self.redis
                        writing = Task { try Self.check(await redis.execute([page]).first) }
                        if users.count < pageSize {
                            try await writing?.value
                            break
                        }
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

    /// Deletes the loading set (best effort: it expires anyway).
    func discard() async {
        _ = await redis.execute([SlotCommands(slot: HashSlot(post: post), commands: [.del([loading])])])
    }

    /// Makes `loaded` likers gathered by `load()` the post's likers set and marks the post
    /// loaded, fenced by `writer` at `epoch` (the epoch held when the load began). Call from the
    /// shard, between batches.
    /// - Throws: Redis's error; a publication whose `RENAME` failed (the loading set expired) is
    ///   undone — the marker and set deleted — and fails.
    func publish(loaded: Int, writer: SlotWriter, epoch: Int64?) async throws {
        let slot = HashSlot(post: post).rawValue
        let group = PostHydration.publishing(post: post, loading: loading, loaded: loaded, layout: layout)
        let replies = try await writer.execute(epochs: epoch.map { [slot: $0] }, [group]).first!.get()
        guard loaded > 0, let renamed = replies.dropFirst().first, case .error = renamed else { return }
        _ = await writer.execute(epochs: epoch.map { [slot: $0] }, PostHydration.transactions(unloading: [post], layout: layout))
        throw CounterError(code: .unavailable, message: "post \(post)'s likers could not be put in place: \(renamed)", retryAfterSeconds: 1)
    }

    private static func check(_ result: Result<[RedisReply], RedisError>?) throws {
        guard let result else { throw RedisError(code: .unexpectedReply, message: "no reply to a hydration page") }
        for reply in try result.get() { _ = try reply.throwingServerError() }
    }
}
