import CounterCore
import Persistence
import RedisDriver
import ShardRouter

/// The second read of a batch, for its *warm* posts (Redis holds their count and the membership
/// of the users seen since they turned warm, not their whole likers set), as plain values: one
/// `HMGET` per post of the count and of the batch's users, and what the replies say. A user the
/// hash does not know has no change waiting, so the batch asks PostgreSQL (`ColdLookup`'s pairs).
/// No I/O: the shard sends `commands(layout:)` and hands the results to `outcome(of:)`.
struct WarmRead {
    /// What the replies say.
    struct Outcome {
        /// Per post: its count and the memberships the hash knows.
        var views: [Int64: ShardDecider.PostView] = [:]
        /// The users of each post the hash does not know, in read order.
        var unknown: [ColdLookup.Pair] = []
        /// Why, per post whose read failed.
        var failures: [Int64: Error] = [:]
    }

    /// The warm posts read, in order, and per post the distinct users whose membership is read.
    let posts: [Int64]
    let users: [[Int64]]

    init(posts: [Int64], users: [[Int64]]) {
        precondition(posts.count == users.count, "one list of users per warm post")
        self.posts = posts
        self.users = users
    }

    /// One plain group per post: `HMGET <warm> n <user> …`.
    func commands(layout: RedisKeyLayout) -> [SlotCommands] {
        zip(posts, users).map { post, users in
            var fields: [RedisArgument] = [RedisKeyLayout.warmCountField]
            fields.reserveCapacity(1 + users.count)
            for user in users { fields.append(user) }
            return SlotCommands(slot: HashSlot(post: post), commands: [.hmget(layout.warmMembers(ofPost: post), fields)])
        }
    }

    /// Reads the replies to `commands(layout:)`, one result per group.
    func outcome(of results: [Result<[RedisReply], RedisError>]) -> Outcome {
        var outcome = Outcome()
        for (index, post) in posts.enumerated() {
            do {
                let result =
                    index < results.count
                    ? results[index]
                    : .failure(RedisError(code: .unexpectedReply, message: "no reply to the warm read of post \(post)"))
                let replies = try result.get()
                guard replies.count == 1, let values = try replies[0].throwingServerError().array, values.count == users[index].count + 1 else {
                    throw RedisError(code: .unexpectedReply, message: "the warm read of post \(post) got a reply of the wrong shape")
                }
                // A warm marker without its hash (it cannot be: both are written and evicted in
                // one transaction) is refused rather than read as a post with no likes.
                guard let count = values[0].integer, count >= 0 else {
                    throw RedisError(code: .unexpectedReply, message: "warm post \(post) has no count in Redis")
                }
                var members: [Int64: Bool] = [:]
                var others: [Int64: [ReactionKind]] = [:]
                for (user, value) in zip(users[index], values.dropFirst()) {
                    guard case .bulkString(let bytes) = value else {
                        outcome.unknown.append(ColdLookup.Pair(post: post, user: user))
                        continue
                    }
                    // `1`/`0` in a deployment of likes only; `1:love`… with other kinds.
                    guard let membership = ReactionValues.warmMembership(bytes) else {
                        throw RedisError(code: .unexpectedReply, message: "user \(user) of warm post \(post) has a value of no known form")
                    }
                    members[user] = membership.liked
                    if !membership.others.isEmpty { others[user] = membership.others }
                }
                outcome.views[post] = ShardDecider.PostView(likesCount: count, members: members, others: others)
            } catch {
                outcome.failures[post] = error
            }
        }
        return outcome
    }
}
