import CounterCore
import Persistence
import RedisDriver
import ShardRouter

/// The read of a batch, as plain values: which commands learn what Redis knows of the batch's
/// posts, and what their replies say.
///
/// Per post, one group: `GET` of its hydration marker, `SCARD` of its likers set, and
/// `SMISMEMBER` of the distinct users the batch touches on it (none for a batch that only counts).
/// The marker tells the post's tier: none (cold: PostgreSQL is its truth), `warm` (its count and
/// known memberships are in a hash: `WarmRead` reads them next) or any other value (hot: the
/// likers set is whole, and these replies are the post).
/// In a deployment with other kinds than `like` (`reactions`), each group also reads the post's
/// other kinds' counts (`HGETALL`, good for a hot or a warm post) and, for a hot post, the other
/// kinds the users hold (`HMGET` of its reactions hash): one round trip still.
/// No I/O: the shard sends `commands(layout:)` and hands the results to `outcome(of:)`.
struct BatchRead {
    /// What the replies say.
    struct Outcome {
        /// Count and memberships of the posts Redis has loaded.
        var views: [Int64: ShardDecider.PostView] = [:]
        /// Posts without the hydration marker, in read order: Redis holds nothing of them.
        var unhydrated: [Int64] = []
        /// Posts whose marker says warm, in read order, with the distinct users to read of each.
        var warm: [Int64] = []
        var warmUsers: [[Int64]] = []
        /// With reactions: each warm post's other kinds' counts.
        var warmKindCounts: [Int64: [ReactionKind: Int64]] = [:]
        /// Why, per post whose read failed (its node failed, or a reply made no sense).
        var failures: [Int64: Error] = [:]
    }

    /// The posts read, in order of first appearance: group `i` reads `posts[i]`.
    private(set) var posts: [Int64] = []
    /// Per post (as `posts`), the distinct users whose membership is read, in order of first
    /// appearance.
    private(set) var users: [[Int64]] = []
    /// Whether the deployment has other kinds than `like`.
    let reactions: Bool

    /// A user of a post (by its index in `posts`), to read each membership once.
    private struct Member: Hashable {
        let post: Int
        let user: Int64
    }

    /// The read `requests` need (`reactions`: the deployment has other kinds than `like`).
    init(_ requests: some Sequence<ShardDecider.Request>, reactions: Bool = false) {
        self.reactions = reactions
        var postIndex: [Int64: Int] = [:]
        var seen: Set<Member> = []
        for request in requests {
            let index: Int
            if let known = postIndex[request.postID] {
                index = known
            } else {
                index = posts.count
                postIndex[request.postID] = index
                posts.append(request.postID)
                users.append([])
            }
            if request.operation != .count, seen.insert(Member(post: index, user: request.userID)).inserted {
                users[index].append(request.userID)
            }
        }
    }

    /// Whether there is nothing to read.
    var isEmpty: Bool { posts.isEmpty }

    /// One plain group per post (in `posts` order).
    func commands(layout: RedisKeyLayout) -> [SlotCommands] {
        zip(posts, users).map { post, users in
            let likers = layout.likers(ofPost: post)
            var commands: [RedisCommand] = [.get(layout.hydratedMarker(ofPost: post)), .scard(likers)]
            if !users.isEmpty { commands.append(.smismember(likers, users)) }
            if reactions {
                commands.append(.hgetall(layout.reactionCounts(ofPost: post)))
                if !users.isEmpty { commands.append(.hmget(layout.reactions(ofPost: post), users)) }
            }
            return SlotCommands(slot: HashSlot(post: post), commands: commands)
        }
    }

    /// Reads the replies to `commands(layout:)`, one result per group.
    func outcome(of results: [Result<[RedisReply], RedisError>]) -> Outcome {
        var outcome = Outcome()
        outcome.views.reserveCapacity(posts.count)
        for (index, post) in posts.enumerated() {
            do {
                let result = index < results.count ? results[index] : .failure(Self.missingReply(post))
                let replies = try result.get()
                let users = users[index]
                let plain = users.isEmpty ? 2 : 3
                guard replies.count == plain + (reactions ? (users.isEmpty ? 1 : 2) : 0) else {
                    throw RedisError(code: .unexpectedReply, message: "\(replies.count) replies to the read of post \(post)")
                }
                let marker = try replies[0].throwingServerError()
                if case .null = marker {
                    outcome.unhydrated.append(post)
                    continue
                }
                var kindCounts: [ReactionKind: Int64] = [:]
                if reactions {
                    guard let counts = ReactionValues.counts(try replies[plain].throwingServerError()) else {
                        throw RedisError(code: .unexpectedReply, message: "post \(post)'s reaction counts in Redis are not kinds and counts")
                    }
                    kindCounts = counts
                }
                if marker.string == RedisKeyLayout.warmMarkerValue {
                    outcome.warm.append(post)
                    outcome.warmUsers.append(users)
                    if reactions { outcome.warmKindCounts[post] = kindCounts }
                    continue
                }
                let count = try replies[1].throwingServerError().integer ?? 0
                let flags = users.isEmpty ? [] : try replies[2].throwingServerError().array ?? []
                guard flags.count == users.count else {
                    throw RedisError(code: .unexpectedReply, message: "SMISMEMBER returned \(flags.count) flags for \(users.count) users")
                }
                var members: [Int64: Bool] = [:]
                members.reserveCapacity(users.count)
                for (user, flag) in zip(users, flags) { members[user] = flag.integer == 1 }
                var others: [Int64: [ReactionKind]] = [:]
                if reactions, !users.isEmpty {
                    let values = try replies[plain + 1].throwingServerError().array ?? []
                    guard values.count == users.count else {
                        throw RedisError(code: .unexpectedReply, message: "HMGET returned \(values.count) values for \(users.count) users")
                    }
                    for (user, value) in zip(users, values) {
                        guard case .bulkString(let bytes) = value else { continue }
                        guard let kinds = ReactionValues.kinds(bytes) else {
                            throw RedisError(code: .unexpectedReply, message: "user \(user)'s reactions of post \(post) in Redis are not kinds")
                        }
                        others[user] = kinds
                    }
                }
                outcome.views[post] = ShardDecider.PostView(likesCount: count, members: members, kindCounts: KindCounts(kindCounts), others: others)
            } catch {
                outcome.failures[post] = error
            }
        }
        return outcome
    }

    private static func missingReply(_ post: Int64) -> RedisError {
        RedisError(code: .unexpectedReply, message: "no reply to the read of post \(post)")
    }
}
