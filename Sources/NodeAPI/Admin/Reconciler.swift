import CounterWire
import Persistence
import WritePath

/// Recounts `posts.likes_count` from `likes` rows and, if asked, repairs drift — safely while the
/// node runs (`PostRecords.repairCount` locks the post's row first). It also compares Redis's
/// count with the rows: a difference while the post's slot has changes waiting for PostgreSQL is
/// expected (pending), one without is reported as Redis drift —
/// and repaired by having Redis load the post from PostgreSQL again (the record: a Redis failover
/// can lose acknowledged writes that were already flushed). Redis is read by the shard that owns
/// the post, between two of its batches, with the rows and whether changes wait, as of one moment
/// (`PostProbe`): a change in flight is never taken for drift.
///
/// With reactions of other kinds than `like` (`kinds`), each kind is checked as the likes are:
/// `reaction_counts` against the `reactions` rows (repaired under the same lock), and Redis's
/// count of each kind against those rows (repaired by the same reload).
struct Reconciler: Sendable {
    typealias Drift = ReconcileReport.Drift
    typealias RedisDrift = ReconcileReport.RedisDrift
    typealias Report = ReconcileReport

    /// Most posts one call checks.
    static let maximumBatch = 10_000

    let records: PostRecords
    let service: CounterService
    /// Whether the deployment holds kinds other than `like`, so that they are checked too.
    var kinds: Bool { !service.reactions.isLikesOnly }

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
        if kinds {
            report.kindsDrifted = try await records.kindDrifts(of: checks.map(\.postID)).map {
                ReconcileReport.KindDrift(postID: $0.postID, kind: $0.kind, count: $0.count, rows: $0.rows)
            }
            report.redisKindsDrifted = []
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
            if let kindsDrifted = report.kindsDrifted {
                var repaired = 0
                for post in Set(kindsDrifted.map(\.postID)).sorted() where try await records.repairKindCounts(of: post) {
                    repaired += 1
                }
                report.kindsRepaired = repaired
            }
            let redisPosts = Set(report.redisDrifted.map(\.postID)).union((report.redisKindsDrifted ?? []).map(\.postID))
            if !redisPosts.isEmpty {
                report.redisRepaired = await service.resyncRedisFromPostgres(redisPosts.sorted()).count
            }
        }
        return report
    }

    /// Posts with at most this many likers are compared member by member when the counts agree:
    /// a failover that lost a like and an unlike leaves the count right and the members wrong.
    /// Larger posts are compared by count (reading millions of members per check costs too much).
    static let membershipCheckLimit: Int64 = 100_000

    /// Redis's count of every checked post Redis holds, against its rows; and for posts up to
    /// `membershipCheckLimit` likers whose counts agree, the members. Each look is one moment's
    /// (`PostProbe`): a difference is drift, or pending when the post's slot had changes waiting.
    private func compareRedis(_ checks: [PostRecords.CountCheck], into report: inout Report) async throws {
        guard !checks.isEmpty, case .counts(let counts) = try await service.probe(.counts(checks.map(\.postID), kinds: kinds))
        else { return }
        for read in counts {
            guard let held = read.redis else { continue }
            var drift: (redis: Int64, rows: Int64, pending: Bool)?
            if held.count != read.rows {
                drift = (held.count, read.rows, read.pending)
            } else if !held.warm, held.count > 0, held.count <= Self.membershipCheckLimit,
                case .likers(let likers) = try await service.probe(.likers(read.postID)),
                let members = likers.redis, members != likers.rows
            {
                // A failover that lost a like and an unlike leaves the count right and the members wrong.
                drift = (Int64(members.count), Int64(likers.rows.count), likers.pending)
            }
            let kindDrifts = kinds ? Self.kindDrifts(read) : []
            if read.pending, drift != nil || !kindDrifts.isEmpty {
                report.redisPending += 1
                continue
            }
            if let drift {
                report.redisDrifted.append(RedisDrift(postID: read.postID, redisCount: drift.redis, likesRows: drift.rows))
            }
            report.redisKindsDrifted? += kindDrifts
        }
    }

    /// The kinds other than `like` whose count in Redis differs from the post's rows of them.
    static func kindDrifts(_ read: PostCountsRead) -> [ReconcileReport.RedisKindDrift] {
        guard let held = read.redis else { return [] }
        return Set(held.kinds.keys).union(read.kindRows.keys).sorted().compactMap { kind in
            let redis = held.kinds[kind] ?? 0
            let rows = read.kindRows[kind] ?? 0
            return redis == rows ? nil : ReconcileReport.RedisKindDrift(postID: read.postID, kind: kind, redisCount: redis, rows: rows)
        }
    }
}
