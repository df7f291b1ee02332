import CounterWire
import Persistence
import PostgresDriver
import RedisDriver
import ShardRouter
import WritePath

/// Recounts `posts.likes_count` from `likes` rows and, if asked, repairs drift — safely while the
/// node runs: each repair locks the post's row first, so a flush transaction for the post either
/// committed before (its rows are counted) or waits and then moves the repaired count by its own
/// delta. It also compares Redis's count with the rows: a difference while the post's slot has
/// changes waiting for PostgreSQL is expected (pending), one without is reported as Redis drift —
/// and repaired by having Redis load the post from PostgreSQL again (the record: a Redis failover
/// can lose acknowledged writes that were already flushed).
struct Reconciler: Sendable {
    typealias Drift = ReconcileReport.Drift
    typealias RedisDrift = ReconcileReport.RedisDrift
    typealias Report = ReconcileReport

    /// Most posts one call checks.
    static let maximumBatch = 10_000

    let postgres: PostgresPool
    let redis: RedisClient
    let layout: RedisKeyLayout
    let service: CounterService

    /// Checks `posts` (or, with `posts == nil`, up to `limit` posts with ids above `after`).
    func reconcile(posts: [Int64]?, after: Int64, limit: Int, repair: Bool) async throws -> Report {
        let limit = min(max(limit, 1), Self.maximumBatch)
        let rows: PostgresRows
        if let posts {
            rows = try await postgres.query("""
                SELECT p.id, p.likes_count, (SELECT count(*) FROM likes l WHERE l.post_id = p.id)
                FROM posts p WHERE p.id = ANY($1::bigint[]) ORDER BY p.id
                """, [.int64Array(posts)])
        } else {
            rows = try await postgres.query("""
                SELECT p.id, p.likes_count, (SELECT count(*) FROM likes l WHERE l.post_id = p.id)
                FROM posts p WHERE p.id > $1 ORDER BY p.id LIMIT $2
                """, [.int64(after), .int64(Int64(limit))])
        }
        var report = Report()
        for row in rows {
            report.checked += 1
            let drift = Drift(postID: try row.int64(0), likesCount: try row.int64(1), likesRows: try row.int64(2))
            if drift.likesCount != drift.likesRows { report.drifted.append(drift) }
        }
        try await compareRedis(rows, into: &report)
        if posts == nil, report.checked == limit, let last = rows.rows.last?.first.flatMap({ $0 }).flatMap({ Int64($0) }) {
            report.nextAfter = last
        }
        if repair {
            for drift in report.drifted {
                try await postgres.withTransaction { connection in
                    let locked = try connection.query("SELECT id FROM posts WHERE id = $1 FOR UPDATE", [.int64(drift.postID)])
                    guard !locked.isEmpty else { return }
                    try connection.query(
                        "UPDATE posts SET likes_count = (SELECT count(*) FROM likes WHERE post_id = $1) WHERE id = $1",
                        [.int64(drift.postID)])
                }
                report.repaired += 1
            }
            if !report.redisDrifted.isEmpty {
                report.redisRepaired = await service.resyncRedisFromPostgres(report.redisDrifted.map(\.postID)).count
            }
        }
        return report
    }

    /// Posts with at most this many likers are compared member by member when the counts agree:
    /// a failover that lost a like and an unlike leaves the count right and the members wrong.
    /// Larger posts are compared by count (reading millions of members per check costs too much).
    static let membershipCheckLimit: Int64 = 100_000

    /// Redis's likers of every checked post Redis holds, against its PostgreSQL rows: the count,
    /// and for posts up to `membershipCheckLimit` likers the members. A post that differs is
    /// looked at again in an order that cannot mistake a change in flight for drift: Redis, then
    /// whether changes wait for the flusher, then the rows — so a change in Redis and not pending
    /// is in the rows. A change appended and flushed between the last two steps can still show,
    /// so drift must hold three times in a row.
    private func compareRedis(_ rows: PostgresRows, into report: inout Report) async throws {
        let checked = try rows.map { (post: try $0.int64(0), rows: try $0.int64(2)) }
        guard !checked.isEmpty else { return }
        let counts = try await redisCounts(checked.map(\.post))
        for post in checked {
            guard let (count, warm) = counts[post.post] else { continue }
            // A warm post has no likers set to compare: its count is checked.
            if count == post.rows {
                guard !warm, count > 0, count <= Self.membershipCheckLimit,
                      try await redisMembers(post.post) != rowMembers(post.post) else { continue }
            }
            var verdict: (pending: Bool, redis: Int64, rows: Int64)? = nil
            for attempt in 0..<3 {
                if attempt > 0 { try await Task.sleep(for: .milliseconds(50)) }
                guard let (redisCount, warm) = try await redisCounts([post.post])[post.post] else { verdict = nil; break }
                let redisSet = !warm && redisCount <= Self.membershipCheckLimit ? try await redisMembers(post.post) : nil
                if await service.hasPendingChanges(forPost: post.post) { verdict = (true, redisCount, 0); break }
                let fresh = try await postgres.query("SELECT count(*) FROM likes WHERE post_id = $1", [.int64(post.post)])
                let rowCount = try fresh.first?.int64(0) ?? 0
                if redisCount == rowCount {
                    guard let redisSet, try await rowMembers(post.post) != redisSet else { verdict = nil; break }
                }
                verdict = (false, redisCount, rowCount)
            }
            guard let verdict else { continue }
            if verdict.pending {
                report.redisPending += 1
            } else {
                report.redisDrifted.append(RedisDrift(postID: post.post, redisCount: verdict.redis, likesRows: verdict.rows))
            }
        }
    }

    /// The users in `post`'s likers set in Redis.
    private func redisMembers(_ post: Int64) async throws -> Set<Int64> {
        let reply = try await redis.send(RedisCommand("SMEMBERS", layout.likers(ofPost: post)), slot: HashSlot(post: post))
        return Set((reply.array ?? []).compactMap(\.integer))
    }

    /// The users with a `likes` row for `post`.
    private func rowMembers(_ post: Int64) async throws -> Set<Int64> {
        let rows = try await postgres.query("SELECT user_id FROM likes WHERE post_id = $1", [.int64(post)])
        return Set(try rows.map { try $0.int64(0) })
    }

    /// The count Redis holds for each post it holds: `SCARD` of a hot post's likers set, the
    /// count field of a warm post's hash; cold posts are left out.
    private func redisCounts(_ posts: [Int64]) async throws -> [Int64: (count: Int64, warm: Bool)] {
        let replies = try await redis.executeAll(posts.map { post in
            SlotCommands(slot: HashSlot(post: post),
                         commands: [.get(layout.hydratedMarker(ofPost: post)), .scard(layout.likers(ofPost: post)),
                                    RedisCommand("HGET", layout.warmMembers(ofPost: post), RedisKeyLayout.warmCountField)])
        })
        var counts: [Int64: (count: Int64, warm: Bool)] = [:]
        for (post, reply) in zip(posts, replies) where reply[0] != .null {
            let warm = reply[0].string == RedisKeyLayout.warmMarkerValue
            counts[post] = ((warm ? reply[2].integer : reply[1].integer) ?? 0, warm)
        }
        return counts
    }
}
