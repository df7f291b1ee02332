/// A post's reactions after an operation (every answer of the reaction routes):
/// `{"post_id":1,"user_id":7,"reactions":{"like":120,"love":4},"total":124,"mine":["love"]}` —
/// each kind's count, the largest first (kinds with none left out), their total, and the kinds
/// the user holds, by name. `user_id` is `null` (and `mine` empty) for a read that names no user.
public struct ReactionStatus: Sendable, Hashable, Codable, CustomStringConvertible {
    /// One kind's count.
    public struct KindCount: Sendable, Hashable {
        public let kind: String
        public let count: Int64

        public init(kind: String, count: Int64) {
            self.kind = kind
            self.count = count
        }
    }

    public let postID: Int64
    public let userID: Int64?
    /// In the answer's order: the largest count first (equal counts by name).
    public let reactions: [KindCount]
    public let total: Int64
    public let mine: [String]

    public init(postID: Int64, userID: Int64?, reactions: [KindCount], total: Int64, mine: [String]) {
        self.postID = postID
        self.userID = userID
        self.reactions = reactions
        self.total = total
        self.mine = mine
    }

    /// The count of `kind` (0 when the post holds none).
    public func count(of kind: String) -> Int64 {
        reactions.first { $0.kind == kind }?.count ?? 0
    }

    public var description: String {
        "post \(postID) user \(userID.map(String.init) ?? "-"): \(reactions.map { "\($0.kind) \($0.count)" }.joined(separator: ", ")) (total \(total)), mine \(mine)"
    }

    enum CodingKeys: String, CodingKey {
        case postID = "post_id"
        case userID = "user_id"
        case reactions
        case total
        case mine
    }

    /// A kind's name as a member of `reactions`.
    struct KindKey: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        postID = try container.decode(Int64.self, forKey: .postID)
        userID = try container.decodeIfPresent(Int64.self, forKey: .userID)
        let counts = try container.nestedContainer(keyedBy: KindKey.self, forKey: .reactions)
        // JSON objects carry no order a decoder keeps: the answer's (largest first) is rebuilt.
        reactions = try counts.allKeys.map { KindCount(kind: $0.stringValue, count: try counts.decode(Int64.self, forKey: $0)) }
            .sorted { $0.count != $1.count ? $0.count > $1.count : $0.kind < $1.kind }
        total = try container.decode(Int64.self, forKey: .total)
        mine = try container.decode([String].self, forKey: .mine)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(postID, forKey: .postID)
        try container.encodeIfPresent(userID, forKey: .userID)
        var counts = container.nestedContainer(keyedBy: KindKey.self, forKey: .reactions)
        for item in reactions { try counts.encode(item.count, forKey: KindKey(stringValue: item.kind)) }
        try container.encode(total, forKey: .total)
        try container.encode(mine, forKey: .mine)
    }
}

/// One user holding a kind of a post, and since when (RFC 3339, UTC, milliseconds: `LikeTime`).
public struct Reactor: Sendable, Hashable, Codable {
    public let userID: Int64
    public let reactedAt: String

    public init(userID: Int64, reactedAt: String) {
        self.userID = userID
        self.reactedAt = reactedAt
    }

    enum CodingKeys: String, CodingKey {
        case userID = "user_id"
        case reactedAt = "reacted_at"
    }
}

/// A page of who reacted to a post with a kind, newest first: the answer of
/// `GET /v1/posts/{post}/reactions/{kind}/users` (`{"post_id":1,"kind":"love","count":4,
/// "users":[{"user_id":7,"reacted_at":"…"}],"next_cursor":"…"}`); `next_cursor` is `null` on the
/// last page.
public struct ReactorsPage: Sendable, Hashable, Codable {
    public let postID: Int64
    public let kind: String
    /// The post's count of the kind.
    public let count: Int64
    public let users: [Reactor]
    public let nextCursor: String?

    public init(postID: Int64, kind: String, count: Int64, users: [Reactor], nextCursor: String?) {
        self.postID = postID
        self.kind = kind
        self.count = count
        self.users = users
        self.nextCursor = nextCursor
    }

    enum CodingKeys: String, CodingKey {
        case postID = "post_id"
        case kind
        case count
        case users
        case nextCursor = "next_cursor"
    }
}

/// One reaction in a user's list: the post, the kind, and when the user reacted.
public struct UserReaction: Sendable, Hashable, Codable {
    public let postID: Int64
    public let kind: String
    /// RFC 3339, UTC, milliseconds (`LikeTime`).
    public let reactedAt: String

    public init(postID: Int64, kind: String, reactedAt: String) {
        self.postID = postID
        self.kind = kind
        self.reactedAt = reactedAt
    }

    enum CodingKeys: String, CodingKey {
        case postID = "post_id"
        case kind
        case reactedAt = "reacted_at"
    }
}

/// `GET /v1/users/{user}/reactions` and `GET /v1/me/reactions`: a page of a user's reactions of
/// every kind (`like` included), newest first, each (post, kind) once.
public struct UserReactionsPage: Sendable, Hashable, Codable {
    public let userID: Int64
    public let reactions: [UserReaction]
    public let nextCursor: String?

    public init(userID: Int64, reactions: [UserReaction], nextCursor: String?) {
        self.userID = userID
        self.reactions = reactions
        self.nextCursor = nextCursor
    }

    enum CodingKeys: String, CodingKey {
        case userID = "user_id"
        case reactions
        case nextCursor = "next_cursor"
    }
}
