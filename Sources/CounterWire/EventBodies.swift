/// One change event: a like of `post_id` by `user_id` appeared (`liked: true`) or went, as
/// committed to PostgreSQL (`{"id":42,"post_id":1,"user_id":7,"liked":true,"liked_at":"…",
/// "committed_at":"…"}`). `id` is stable and grows in commit order. In a deployment with other
/// kinds than `like`, every event also names its `kind` (`like` included), and a switch of kinds
/// with one kind per user — one event — the kind it replaced (`replaced_kind`, else `null`);
/// a deployment of likes only sends neither member.
public struct ChangeEvent: Sendable, Hashable, Codable {
    public let id: Int64
    public let postID: Int64
    public let userID: Int64
    public let liked: Bool
    /// When the like or unlike was acknowledged to its caller: RFC 3339, UTC, milliseconds (`LikeTime`).
    public let likedAt: String
    /// When the flush that wrote it committed (just before): RFC 3339, UTC, milliseconds.
    public let committedAt: String
    /// With reactions: the kind (`like` for a like); `nil` (left out) with likes only.
    public let kind: String?
    /// With reactions: the kind a switch replaced, or `nil` (sent as `null`); left out with
    /// likes only.
    public let replacedKind: String?

    public init(
        id: Int64, postID: Int64, userID: Int64, liked: Bool, likedAt: String, committedAt: String, kind: String? = nil,
        replacedKind: String? = nil
    ) {
        self.id = id
        self.postID = postID
        self.userID = userID
        self.liked = liked
        self.likedAt = likedAt
        self.committedAt = committedAt
        self.kind = kind
        self.replacedKind = replacedKind
    }

    enum CodingKeys: String, CodingKey {
        case id
        case postID = "post_id"
        case userID = "user_id"
        case liked
        case likedAt = "liked_at"
        case committedAt = "committed_at"
        case kind
        case replacedKind = "replaced_kind"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(Int64.self, forKey: .id)
        postID = try container.decode(Int64.self, forKey: .postID)
        userID = try container.decode(Int64.self, forKey: .userID)
        liked = try container.decode(Bool.self, forKey: .liked)
        likedAt = try container.decode(String.self, forKey: .likedAt)
        committedAt = try container.decode(String.self, forKey: .committedAt)
        kind = try container.decodeIfPresent(String.self, forKey: .kind)
        replacedKind = try container.decodeIfPresent(String.self, forKey: .replacedKind)
    }

    /// A deployment of likes only leaves `kind` and `replaced_kind` out; one with reactions
    /// sends both (`replaced_kind` `null` unless the event is a switch).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(postID, forKey: .postID)
        try container.encode(userID, forKey: .userID)
        try container.encode(liked, forKey: .liked)
        try container.encode(likedAt, forKey: .likedAt)
        try container.encode(committedAt, forKey: .committedAt)
        if let kind {
            try container.encode(kind, forKey: .kind)
            try container.encodeIfPresent(replacedKind, forKey: .replacedKind)
        }
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
