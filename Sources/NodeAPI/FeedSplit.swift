import NodeHTTP
import ShardRouter
import WritePath

/// A feed query's posts that other nodes own: grouped by owner, asked of each owner in one
/// forwarded query (all at once), and returned by post.
enum FeedSplit {
    static func ask(_ posts: [Int64], user: Int64?, like request: HTTPRequest, api: CounterAPI) async throws -> [Int64: LikeState] {
        let map = api.member?.map
        var byOwner: [String: [Int64]] = [:]
        for post in posts {
            let owner = map?.owner(of: HashSlot(post: post).rawValue)?.id ?? ""
            byOwner[owner, default: []].append(post)
        }
        return try await withThrowingTaskGroup(of: [Int64: LikeState].self) { group in
            for part in byOwner.values {
                group.addTask { try await api.forwardFeed(part, user: user, like: request) }
            }
            var states: [Int64: LikeState] = [:]
            for try await answer in group { states.merge(answer) { first, _ in first } }
            return states
        }
    }
}
