import Persistence
import ShardRouter

/// An operator's look at posts — `/admin/posts/{post}` and reconcile — made by the shard that owns
/// them, as work between two of its batches: nothing of theirs is written to Redis meanwhile, and
/// the shard says at that same moment whether their slots have changes waiting for PostgreSQL (a
/// slot with none is not flushed either). Redis, PostgreSQL and "pending" are read as of one
/// moment, so a change in flight is never mistaken for drift, with no second look.
public enum PostProbe: Sendable {
    /// A post in Redis (`PostKeys.state`) and in PostgreSQL, and a user's membership of it.
    case inspect(post: Int64, user: Int64?)
    /// The counts Redis holds of `posts` (those it holds) against their rows in PostgreSQL; with
    /// `kinds`, also each kind other than `like`.
    case counts([Int64], kinds: Bool = false)
    /// A post's likers in Redis (if it holds the post) against its rows.
    case likers(Int64)

    /// The posts looked at.
    var posts: [Int64] {
        switch self {
        case .inspect(let post, _), .likers(let post): return [post]
        case .counts(let posts, _): return posts
        }
    }
}

/// What a `PostProbe` read.
public enum PostProbeResult: Sendable {
    /// Redis's view of the post, and PostgreSQL's (`nil`: the post does not exist).
    case inspected(PostKeys.State, PostRecords.Inspection?)
    /// Per post that exists in PostgreSQL.
    case counts([PostCountsRead])
    case likers(PostLikersRead)
}

/// One post's count in Redis and rows in PostgreSQL, read at one moment.
public struct PostCountsRead: Sendable, Equatable {
    public let postID: Int64
    /// What Redis holds (`nil`: the post is cold, Redis holds nothing of it).
    public let redis: PostKeys.Count?
    /// The post's rows in `likes`.
    public let rows: Int64
    /// The post's rows in `reactions` per kind (kinds without rows left out), when asked for.
    public let kindRows: [String: Int64]
    /// Its slot had changes waiting for PostgreSQL: Redis may be ahead of the rows.
    public let pending: Bool
}

/// One post's likers in Redis and in PostgreSQL, read at one moment.
public struct PostLikersRead: Sendable, Equatable {
    public let postID: Int64
    /// Its likers set (`nil`: Redis does not hold the post whole — cold or warm).
    public let redis: Set<Int64>?
    public let rows: Set<Int64>
    /// Its slot had changes waiting for PostgreSQL.
    public let pending: Bool
}

extension PostProbe {
    /// Reads what the probe asks: Redis through `keys`, PostgreSQL through `records`; `pending`
    /// are the slots with changes waiting as the probe began. (The shard's shell calls it, between
    /// two of the shard's batches.)
    func read(keys: PostKeys, records: PostRecords, pending: Set<UInt16>) async -> Result<PostProbeResult, Error> {
        do {
            switch self {
            case .inspect(let post, let user):
                let redis = try await keys.state(of: post, user: user)
                return .success(.inspected(redis, try await records.inspect(post: post, user: user)))
            case .counts(let posts, let kinds):
                let held = try await keys.counts(of: posts, kinds: kinds)
                let rows = try await records.counts(of: posts)
                let kindRows = kinds ? try await records.kindRows(of: posts) : [:]
                return .success(
                    .counts(
                        rows.map { row in
                            PostCountsRead(
                                postID: row.postID, redis: held[row.postID], rows: row.likesRows,
                                kindRows: kindRows[row.postID] ?? [:],
                                pending: pending.contains(HashSlot(post: row.postID).rawValue))
                        }))
            case .likers(let post):
                let held = try await keys.counts(of: [post])[post]
                let redis = held == nil || held!.warm ? nil : try await keys.likers(of: post)
                return .success(
                    .likers(
                        PostLikersRead(
                            postID: post, redis: redis, rows: try await records.likers(of: post),
                            pending: pending.contains(HashSlot(post: post).rawValue))))
            }
        } catch {
            return .failure(error)
        }
    }
}
