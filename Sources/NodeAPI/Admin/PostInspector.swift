import CounterWire
import Persistence
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

/// Gathers a `PostInspection`: what Redis and PostgreSQL hold of the post, read by the shard
/// that owns it between two of its batches (`PostProbe.inspect`), so both are of one moment.
struct PostInspector: Sendable {
    let service: CounterService

    func inspect(post: Int64, user: Int64?) async throws -> PostInspection {
        guard case .inspected(let redis, let row) = try await service.probe(.inspect(post: post, user: user)) else {
            preconditionFailure("an inspection's probe answers an inspection")
        }
        let redisView = PostInspection.Redis(
            hydrated: redis.hydrated, warm: redis.warm, likesCount: redis.likesCount, pendingChanges: redis.pendingChanges,
            secondsSinceFlush: await service.secondsSinceFlush(forPost: post), isLiked: redis.isLiked)
        let postgresView = PostInspection.Postgres(
            exists: row != nil, likesCount: row?.likesCount, likesRows: row?.likesRows ?? 0,
            isLiked: user == nil ? nil : row?.isLiked ?? false)
        return PostInspection(
            postID: post, verdict: InspectionVerdict.of(redis: redisView, postgres: postgresView),
            redis: redisView, postgres: postgresView, userID: user)
    }
}
