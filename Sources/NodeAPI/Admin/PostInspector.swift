import CounterWire
import Persistence
import PostgresDriver
import RedisDriver
import ShardRouter
import WritePath

/// The verdict on a post seen in Redis and PostgreSQL (`PostInspection.Verdict`). Pure.
enum InspectionVerdict {
    static func of(redis: PostInspection.Redis, postgres: PostInspection.Postgres) -> String {
        if !postgres.exists { return PostInspection.Verdict.unknownPost }
        if let count = postgres.likesCount, count != postgres.likesRows { return PostInspection.Verdict.drift }
        guard redis.hydrated else { return PostInspection.Verdict.notInRedis }
        // A warm post that does not know the user has PostgreSQL's membership for them.
        let isLiked = redis.tier == PostInspection.Tier.warm && redis.isLiked == nil ? postgres.isLiked : redis.isLiked
        if redis.likesCount == postgres.likesRows && isLiked == postgres.isLiked {
            return redis.pendingChanges > 0 ? PostInspection.Verdict.pending : PostInspection.Verdict.agree
        }
        return redis.pendingChanges > 0 ? PostInspection.Verdict.pending : PostInspection.Verdict.drift
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
        var warmFields: [RedisArgument] = [RedisKeyLayout.warmCountField]
        if let user { warmFields.append(user) }
        var commands: [RedisCommand] = [
            .get(layout.hydratedMarker(ofPost: post)), .scard(likers),
            .xrange(layout.changeLog(of: HashSlot(post: post)), count: 10_000),
            .hmget(layout.warmMembers(ofPost: post), warmFields),
        ]
        if let user { commands.append(.sismember(likers, user)) }
        let replies = try await redis.pipeline(commands, slot: HashSlot(post: post))
        let marker = try replies[0].throwingServerError()
        let hydrated = marker != .null
        let warm = marker.string == RedisKeyLayout.warmMarkerValue
        let warmValues = try replies[3].throwingServerError().array ?? []
        let pending = try replies[2].streamEntries().reduce(0) { count, entry in
            count + (ChangeLogEntry.changes(from: entry) ?? []).filter { $0.postID == post }.count
        }
        let rows = try await postgres.query("""
            SELECT p.likes_count, (SELECT count(*) FROM likes l WHERE l.post_id = $1),
                   (SELECT count(*) FROM likes l WHERE l.post_id = $1 AND l.user_id = $2)
            FROM posts p WHERE p.id = $1
            """, [.int64(post), user.map { .int64($0) } ?? .null])
        let row = rows.first
        // A warm post's count and the user's membership are in its hash (a user it does not
        // know has no change waiting: PostgreSQL's row is the membership).
        let isLiked: Bool? = user == nil ? nil
            : warm ? warmValues.dropFirst().first.flatMap { $0.string.map { $0 == "1" } } : replies[4].integer == 1
        let redisView = PostInspection.Redis(
            hydrated: hydrated, warm: warm, likesCount: (warm ? warmValues.first?.integer : replies[1].integer) ?? 0, pendingChanges: pending,
            secondsSinceFlush: await service.secondsSinceFlush(forPost: post), isLiked: isLiked)
        let postgresView = PostInspection.Postgres(
            exists: row != nil, likesCount: try row?.int64(0), likesRows: try row?.int64(1) ?? 0,
            isLiked: user == nil ? nil : (try row?.int64(2) ?? 0) > 0)
        return PostInspection(postID: post, verdict: InspectionVerdict.of(redis: redisView, postgres: postgresView),
                              redis: redisView, postgres: postgresView, userID: user)
    }
}
