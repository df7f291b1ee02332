import RedisDriver
import ShardRouter

/// What Redis holds of a post, read for the operators' checks (`/admin/inspect`,
/// `/admin/reconcile`): its tier, the count Redis answers with, a user's membership, the changes
/// its slot's log still holds for it.
///
/// These keys are the write path's: only the shard that owns the post's slot reads them this way,
/// between two of its batches (`PostProbe`), so no write of theirs races the read.
public struct PostKeys: Sendable {
    /// One post in Redis, as an inspection sees it.
    public struct State: Sendable, Equatable {
        /// Redis holds the post, hot or warm (its `hydratedMarker` is set).
        public let hydrated: Bool
        /// Redis holds the post warm: its count and the memberships seen, not its whole likers set.
        public let warm: Bool
        /// The count Redis answers with: the warm hash's count for a warm post, else the size of
        /// its likers set (0 when there is none).
        public let likesCount: Int64
        /// The post's changes in the first 10,000 entries of its slot's write-behind log.
        public let pendingChanges: Int
        /// Whether the user asked about likes the post, as Redis says: its likers set, or for a
        /// warm post its hash (`nil` when the hash does not know the user); `nil` when no user was
        /// asked about.
        public let isLiked: Bool?

        public init(hydrated: Bool, warm: Bool, likesCount: Int64, pendingChanges: Int, isLiked: Bool?) {
            self.hydrated = hydrated
            self.warm = warm
            self.likesCount = likesCount
            self.pendingChanges = pendingChanges
            self.isLiked = isLiked
        }
    }

    /// The count Redis holds of a post it holds.
    public struct Count: Sendable, Equatable {
        /// The likers set's size (hot), or the warm hash's count (warm).
        public let count: Int64
        public let warm: Bool
        /// The count of each kind other than `like` Redis holds (`reactionCounts`), when asked
        /// for (else empty). A hash of another shape reads as empty.
        public let kinds: [String: Int64]

        public init(count: Int64, warm: Bool, kinds: [String: Int64] = [:]) {
            self.count = count
            self.warm = warm
            self.kinds = kinds
        }
    }

    private let redis: RedisClient
    private let layout: RedisKeyLayout

    /// Reads `layout`'s keys through `redis`.
    public init(redis: RedisClient, layout: RedisKeyLayout) {
        self.redis = redis
        self.layout = layout
    }

    /// `post` in Redis, and `user`'s membership of it; one pipeline on the post's slot.
    /// - Throws: `RedisError` when the pipeline fails, or the marker, log or warm hash read does.
    public func state(of post: Int64, user: Int64?) async throws -> State {
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
        let warm = marker.string == RedisKeyLayout.warmMarkerValue
        let warmValues = try replies[3].throwingServerError().array ?? []
        let pending = try replies[2].streamEntries().reduce(0) { count, entry in
            count + (ChangeLogEntry.changes(from: entry) ?? []).filter { $0.postID == post }.count
        }
        // A warm post's count and the user's membership are in its hash (a user it does not
        // know has no change waiting: PostgreSQL's row is the membership).
        let isLiked: Bool? =
            user == nil
            ? nil
            : warm ? warmValues.dropFirst().first.flatMap { $0.string.map { $0 == "1" } } : replies[4].integer == 1
        return State(
            hydrated: marker != .null, warm: warm, likesCount: (warm ? warmValues.first?.integer : replies[1].integer) ?? 0,
            pendingChanges: pending, isLiked: isLiked)
    }

    /// The count Redis holds for each of `posts` it holds: `SCARD` of a hot post's likers set, the
    /// count field of a warm post's hash, and with `kinds` each other kind's count; cold posts
    /// are left out.
    public func counts(of posts: [Int64], kinds: Bool = false) async throws -> [Int64: Count] {
        let replies = try await redis.executeAll(
            posts.map { post in
                var commands: [RedisCommand] = [
                    .get(layout.hydratedMarker(ofPost: post)), .scard(layout.likers(ofPost: post)),
                    RedisCommand("HGET", layout.warmMembers(ofPost: post), RedisKeyLayout.warmCountField),
                ]
                if kinds { commands.append(.hgetall(layout.reactionCounts(ofPost: post))) }
                return SlotCommands(slot: HashSlot(post: post), commands: commands)
            })
        var counts: [Int64: Count] = [:]
        for (post, reply) in zip(posts, replies) where reply[0] != .null {
            let warm = reply[0].string == RedisKeyLayout.warmMarkerValue
            var held: [String: Int64] = [:]
            if kinds, let read = ReactionValues.counts(reply[3]) {
                for (kind, count) in read { held[kind.name] = count }
            }
            counts[post] = Count(count: (warm ? reply[2].integer : reply[1].integer) ?? 0, warm: warm, kinds: held)
        }
        return counts
    }

    /// The users in `post`'s likers set.
    public func likers(of post: Int64) async throws -> Set<Int64> {
        let reply = try await redis.send(RedisCommand("SMEMBERS", layout.likers(ofPost: post)), slot: HashSlot(post: post))
        return Set((reply.array ?? []).compactMap(\.integer))
    }
}
