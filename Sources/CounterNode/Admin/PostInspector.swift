import Persistence
import ShardRouter

/// One post seen from Redis and PostgreSQL side by side, with a verdict.
struct PostInspection: Sendable, Equatable {
    var postID: Int64
    var redisHydrated: Bool
    var redisCount: Int64
    var postgresExists: Bool
    var postgresLikesCount: Int64?
    var postgresRows: Int64
    /// Changes to the post still waiting in its slot's log (read up to 10,000 entries).
    var pendingChanges: Int
    var user: Int64?
    var redisMember: Bool?
    var postgresMember: Bool?
    /// Seconds since the flusher of the post's shard last committed.
    var secondsSinceFlush: Double = 0

    /// `agree`, `pending` (differences explained by waiting changes), `drift`, or `unknown`.
    var verdict: String {
        if !postgresExists { return "unknown_post" }
        if let count = postgresLikesCount, count != postgresRows { return "drift" }
        guard redisHydrated else { return "not_in_redis" }
        if redisCount == postgresRows && redisMember == postgresMember { return pendingChanges > 0 ? "pending" : "agree" }
        return pendingChanges > 0 ? "pending" : "drift"
    }

    var json: [UInt8] {
        var writer = JSONWriter()
        writer.objectStart()
        writer.field("post_id", postID)
        writer.field("verdict", verdict)
        writer.key("redis")
        writer.objectStart()
        writer.field("hydrated", redisHydrated)
        writer.field("likes_count", redisCount)
        writer.field("pending_changes", pendingChanges)
        writer.field("seconds_since_flush", secondsSinceFlush)
        if let redisMember { writer.field("is_liked", redisMember) }
        writer.objectEnd()
        writer.key("postgres")
        writer.objectStart()
        writer.field("exists", postgresExists)
        if let postgresLikesCount { writer.field("likes_count", postgresLikesCount) } else { writer.nullField("likes_count") }
        writer.field("likes_rows", postgresRows)
        if let postgresMember { writer.field("is_liked", postgresMember) }
        writer.objectEnd()
        if let user { writer.field("user_id", user) }
        writer.objectEnd()
        return writer.bytes
    }
}

/// Gathers a `PostInspection`.
struct PostInspector: Sendable {
    let service: CounterService
    let postgres: PostgresPool
    let redis: RedisClient
    let layout: RedisKeyLayout

    func inspect(post: Int64, user: Int64?) async throws -> PostInspection {
        let likers = layout.likers(ofPost: post)
        var commands: [RedisCommand] = [
            .exists([layout.hydratedMarker(ofPost: post)]), .scard(likers),
            .xrange(layout.changeLog(of: HashSlot(post: post)), count: 10_000),
        ]
        if let user { commands.append(.sismember(likers, user)) }
        let replies = try await redis.pipeline(commands, slot: HashSlot(post: post))
        let pending = try replies[2].streamEntries().filter { ChangeLogEntry.change(from: $0)?.postID == post }.count
        let rows = try await postgres.query("""
            SELECT p.likes_count, (SELECT count(*) FROM likes l WHERE l.post_id = $1),
                   (SELECT count(*) FROM likes l WHERE l.post_id = $1 AND l.user_id = $2)
            FROM posts p WHERE p.id = $1
            """, [.int64(post), user.map { .int64($0) } ?? .null])
        let row = rows.first
        return PostInspection(
            postID: post,
            redisHydrated: replies[0].integer == 1,
            redisCount: replies[1].integer ?? 0,
            postgresExists: row != nil,
            postgresLikesCount: try row?.int64(0),
            postgresRows: try row?.int64(1) ?? 0,
            pendingChanges: pending,
            user: user,
            redisMember: user == nil ? nil : replies[3].integer == 1,
            postgresMember: user == nil ? nil : (try row?.int64(2) ?? 0) > 0,
            secondsSinceFlush: await service.secondsSinceFlush(forPost: post))
    }
}
