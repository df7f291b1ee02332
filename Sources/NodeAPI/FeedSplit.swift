import CounterWire
import NodeHTTP
import ShardRouter
import WritePath

/// A feed query's posts that other nodes own: grouped by owner, asked of each owner in one
/// forwarded query (all at once), and returned by post.
enum FeedSplit {
    /// What the owners answered, by post.
    struct Answers: Sendable {
        var states: [Int64: LikeState] = [:]
        /// With `"include":["recent_likers"]`: each post's newest likers.
        var recentLikers: [Int64: [Liker]] = [:]
    }

    static func ask(_ posts: [Int64], user: Int64?, include: [String]?, like request: HTTPRequest, api: CounterAPI) async throws -> Answers {
        let map = api.member?.map
        var byOwner: [String: [Int64]] = [:]
        for post in posts {
            let owner = map?.owner(of: HashSlot(post: post).rawValue)?.id ?? ""
            byOwner[owner, default: []].append(post)
        }
        return try await withThrowingTaskGroup(of: Answers.self) { group in
            for part in byOwner.values {
                group.addTask { try await api.forwardFeed(part, user: user, include: include, like: request) }
            }
            var all = Answers()
            for try await answer in group {
                all.states.merge(answer.states) { first, _ in first }
                all.recentLikers.merge(answer.recentLikers) { first, _ in first }
            }
            return all
        }
    }
}
