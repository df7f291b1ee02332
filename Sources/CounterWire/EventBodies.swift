/// One change event: a like of `post_id` by `user_id` appeared (`liked: true`) or went, as
/// committed to PostgreSQL (`{"id":42,"post_id":1,"user_id":7,"liked":true,"liked_at":"…",
/// "committed_at":"…"}`). `id` is stable and grows in commit order.
public struct ChangeEvent: Sendable, Hashable, Codable {
    public let id: Int64
    public let postID: Int64
    public let userID: Int64
    public let liked: Bool
    /// When the like or unlike was acknowledged to its caller: RFC 3339, UTC, milliseconds (`LikeTime`).
    public let likedAt: String
    /// When the flush that wrote it committed (just before): RFC 3339, UTC, milliseconds.
    public let committedAt: String

    public init(id: Int64, postID: Int64, userID: Int64, liked: Bool, likedAt: String, committedAt: String) {
        self.id = id
        self.postID = postID
        self.userID = userID
        self.liked = liked
        self.likedAt = likedAt
        self.committedAt = committedAt
    }

    enum CodingKeys: String, CodingKey {
        case id
        case postID = "post_id"
        case userID = "user_id"
        case liked
        case likedAt = "liked_at"
        case committedAt = "committed_at"
    }
}

/// The answer of `GET /v1/events?after=N`: the events after `N`, oldest first
/// (`{"events":[…],"next_after":57,"newest_id":90}`). Pass `next_after` as the next `after`;
/// `newest_id` is the newest event committed when the page was read (how far behind the
/// consumer is: `newest_id - next_after` events).
public struct EventsPage: Sendable, Hashable, Codable {
    public let events: [ChangeEvent]
    public let nextAfter: Int64
    public let newestID: Int64

    public init(events: [ChangeEvent], nextAfter: Int64, newestID: Int64) {
        self.events = events
        self.nextAfter = nextAfter
        self.newestID = newestID
    }

    enum CodingKeys: String, CodingKey {
        case events
        case nextAfter = "next_after"
        case newestID = "newest_id"
    }
}
