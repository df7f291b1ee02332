import CounterCore
import Foundation

/// Pages of the lists: a post's likers (`GET /v1/posts/{post}/likers`) or a user's likes
/// (`GET /v1/users/{user}/likes`), `limit` items each, a share of them deep in the list. A deep
/// page carries a cursor at a random time of `microseconds` — built as the node builds its
/// cursors, as a client paging far down would hold one.
public struct ListPagesWorkload: Workload {
    /// Whose list.
    public enum Target: Sendable {
        case likers(post: Int64)
        case likes(user: Int64)
    }

    public let targets: [Target]
    public let limit: Int
    /// Share of the pages asked with a cursor (0…1).
    public let deepShare: Double
    /// Times of the list's items (microseconds since 1970) a deep cursor is drawn from.
    public let microseconds: ClosedRange<Int64>
    public let token: String?
    /// Which endpoint each request goes to.
    public var routing = ScenarioWorkload.Routing.first

    public init(targets: [Target], limit: Int = 20, deepShare: Double = 0.5, microseconds: ClosedRange<Int64>, token: String?) {
        precondition(!targets.isEmpty, "a list workload needs a list")
        self.targets = targets
        self.limit = limit
        self.deepShare = deepShare
        self.microseconds = microseconds
        self.token = token
    }

    public func request(connection: Int, sequence: Int, random: inout SystemRandomNumberGenerator) -> PlannedRequest {
        let target = targets[Int.random(in: 0..<targets.count, using: &random)]
        var path: String
        let owner: Int64
        let tag: String
        switch target {
        case .likers(let post): (path, owner, tag) = ("/v1/posts/\(post)/likers", post, "l")
        case .likes(let user): (path, owner, tag) = ("/v1/users/\(user)/likes", user, "u")
        }
        path += "?limit=\(limit)"
        if Double.random(in: 0..<1, using: &random) < deepShare {
            let at = Int64.random(in: microseconds, using: &random)
            path += "&cursor=" + Self.cursor("\(tag).\(owner).\(at).1")
        }
        let post: Int64? = if case .likers(let post) = target { post } else { nil }
        return PlannedRequest(
            bytes: ScenarioWorkload.http("GET", path, token: token, body: nil),
            endpoint: routing.endpoint(post: post, connection: connection))
    }

    /// `text` in base64url without padding, as the node's cursors are.
    static func cursor(_ text: String) -> String {
        Base64URL.encode(Array(text.utf8))
    }
}
