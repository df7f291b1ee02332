import CounterWire
import Persistence
import WritePath

/// Recounts `posts.likes_count` from `likes` rows and, if asked, repairs drift — safely while the
/// node runs (`PostRecords.repairCount` locks the post's row first). It also compares Redis's
/// count with the rows: a difference while the post's slot has changes waiting for PostgreSQL is
/// expected (pending), one without is reported as Redis drift —
/// and repaired by having Redis load the post from PostgreSQL again (the record: a Redis failover
/// can lose acknowledged writes that were already flushed).
struct Reconciler: Sendable {
    typealias Drift = ReconcileReport.Drift
    typealias RedisDrift = ReconcileReport.RedisDrift
    typealias Report = ReconcileReport

    /// Most posts one call checks.
    static let maximumBatch = 10_000

    let records: PostRecords
    /// Redis's side: the keys the post's shard owns, read here (hence the reads again below).
    let keys: PostKeys
    let service: CounterService

    /// Checks `posts` (or, with `posts == nil`, up to `limit` posts with ids above `after`).
    func reconcile(posts: [Int64]?, after: Int64, limit: Int, repair: Bool) async throws -> Report {
        let limit = min(max(limit, 1), Self.maximumBatch)
        let checks: [PostRecords.CountCheck]
        if let posts {
            checks = try await records.counts(of: posts)
        } else {
            checks = try await records.counts(after: after, limit: limit)
        }
        var report = Report()
        for check in checks {
            report.checked += 1
            if check.likesCount != check.likesRows {
                report.drifted.append(Drift(postID: check.postID, likesCount: check.likesCount, likesRows: check.likesRows))
            }
        }
        try await compareRedis(checks, into: &report)
        if posts == nil, report.checked == limit, let last = checks.last?.postID {
            report.nextAfter = last
        }
        if repair {
            for drift in report.drifted {
                try await records.repairCount(of: drift.postID)
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
    private func compareRedis(_ checks: [PostRecords.CountCheck], into report: inout Report) async throws {
        let checked = checks.map { (post: $0.postID, rows: $0.likesRows) }
        guard !checked.isEmpty else { return }
        let counts = try await keys.counts(of: checked.map(\.post))
        for post in checked {
            guard let held = counts[post.post] else { continue }
            // A warm post has no likers set to compare: its count is checked.
            if held.count == post.rows {
                guard !held.warm, held.count > 0, held.count <= Self.membershipCheckLimit,
                      try await keys.likers(of: post.post) != records.likers(of: post.post) else { continue }
            }
            var verdict: (pending: Bool, redis: Int64, rows: Int64)? = nil
            for attempt in 0..<3 {
                if attempt > 0 { try await Task.sleep(for: .milliseconds(50)) }
                guard let held = try await keys.counts(of: [post.post])[post.post] else { verdict = nil; break }
                let redisCount = held.count
                let redisSet = !held.warm && redisCount <= Self.membershipCheckLimit ? try await keys.likers(of: post.post) : nil
                if await service.hasPendingChanges(forPost: post.post) { verdict = (true, redisCount, 0); break }
                let rowCount = try await records.rowCount(of: post.post)
                if redisCount == rowCount {
                    guard let redisSet, try await records.likers(of: post.post) != redisSet else { verdict = nil; break }
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
}
