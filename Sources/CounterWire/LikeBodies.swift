/// A user's like of a post and the post's count: the answer of like, unlike, toggle and read
/// (`{"post_id":1,"user_id":7,"is_liked":true,"likes_count":124}`).
public struct LikeStatus: Sendable, Hashable, Codable, CustomStringConvertible {
    public let postID: Int64
    public let userID: Int64
    public let isLiked: Bool
    public let likesCount: Int64

    public init(postID: Int64, userID: Int64, isLiked: Bool, likesCount: Int64) {
        self.postID = postID
        self.userID = userID
        self.isLiked = isLiked
        self.likesCount = likesCount
    }

    public var description: String { "post \(postID) user \(userID): liked \(isLiked), count \(likesCount)" }

    enum CodingKeys: String, CodingKey {
        case postID = "post_id"
        case userID = "user_id"
        case isLiked = "is_liked"
        case likesCount = "likes_count"
    }
}

/// A post's count: the answer of `GET /v1/posts/{post}` (`{"post_id":1,"likes_count":124}`).
public struct PostCount: Sendable, Equatable, Codable {
    public let postID: Int64
    public let likesCount: Int64

    public init(postID: Int64, likesCount: Int64) {
        self.postID = postID
        self.likesCount = likesCount
    }

    enum CodingKeys: String, CodingKey {
        case postID = "post_id"
        case likesCount = "likes_count"
    }
}

/// The body of `POST /v1/posts/query`: up to `maximumPosts` posts and the user whose likes to
/// show (`{"post_ids":[1,2,3],"user_id":7}`), and what else each post's entry should carry
/// (`"include":["recent_likers"]`). Other members are refused.
public struct FeedQuery: Sendable, Equatable, Codable {
    /// Most post ids one feed query may carry.
    public static let maximumPosts = 1_000
    /// What `include` may ask: each post's most recent likers (`FeedEntry.recentLikers`).
    public static let recentLikers = "recent_likers"
    /// What `include` may ask: each post's reactions — its kinds' counts (the largest first, at
    /// most `--reaction-summary-kinds`), their total, and the viewer's kinds
    /// (`FeedEntry.reactions`, `total`, `mine`).
    public static let reactions = "reactions"
    /// Everything `include` may ask.
    public static let includable = [recentLikers, reactions]
    /// How many recent likers an entry carries at most.
    public static let recentLikersCount = 3

    public let postIDs: [Int64]
    public let userID: Int64
    /// Extras each entry carries (`recentLikers`); `nil`: none.
    public let include: [String]?

    public init(postIDs: [Int64], userID: Int64, include: [String]? = nil) {
        self.postIDs = postIDs
        self.userID = userID
        self.include = include
    }

    enum CodingKeys: String, CodingKey, CaseIterable {
        case postIDs = "post_ids"
        case userID = "user_id"
        case include
    }

    public init(from decoder: any Decoder) throws {
        try UnknownMembers.refuse(in: decoder, allowed: CodingKeys.allCases)
        let container = try decoder.container(keyedBy: CodingKeys.self)
        postIDs = try container.decode([WireInteger].self, forKey: .postIDs).map(\.value)
        userID = try container.decode(WireInteger.self, forKey: .userID).value
        include = try container.decodeIfPresent([String].self, forKey: .include)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(postIDs, forKey: .postIDs)
        try container.encode(userID, forKey: .userID)
        // Left out when absent (`WireEncoder` writes an absent optional as `null`).
        if let include { try container.encode(include, forKey: .include) }
    }
}

/// `POST /v1/posts/query` with `user_id` optional: from an end user, whose token names the user
/// (when it is given, it must be the token's), or, with the API token, a logged-out viewer's
/// page (counts only). `"user_id":null` is read as left out: it can only narrow the answer (no
/// one's likes), and the client library sent it until it learnt to leave the member out.
public struct OwnFeedQuery: Sendable, Equatable, Codable {
    public let postIDs: [Int64]
    public let userID: Int64?
    /// Extras each entry carries (`FeedQuery.recentLikers`); `nil`: none.
    public let include: [String]?

    public init(postIDs: [Int64], userID: Int64? = nil, include: [String]? = nil) {
        self.postIDs = postIDs
        self.userID = userID
        self.include = include
    }

    enum CodingKeys: String, CodingKey, CaseIterable {
        case postIDs = "post_ids"
        case userID = "user_id"
        case include
    }

    public init(from decoder: any Decoder) throws {
        try UnknownMembers.refuse(in: decoder, allowed: CodingKeys.allCases)
        let container = try decoder.container(keyedBy: CodingKeys.self)
        postIDs = try container.decode([WireInteger].self, forKey: .postIDs).map(\.value)
        userID = try container.decodeIfPresent(WireInteger.self, forKey: .userID)?.value
        include = try container.decodeIfPresent([String].self, forKey: .include)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(postIDs, forKey: .postIDs)
        // Left out when absent (`WireEncoder` writes an absent optional as `null`).
        if let userID { try container.encode(userID, forKey: .userID) }
        if let include { try container.encode(include, forKey: .include) }
    }
}

/// The seed's answer (`POST /api/posts/{id}/like`), in the shape its Laravel endpoint returned.
public struct SeedLikeStatus: Sendable, Equatable, Codable {
    public let isLiked: Bool
    public let likesCount: Int64

    public init(isLiked: Bool, likesCount: Int64) {
        self.isLiked = isLiked
        self.likesCount = likesCount
    }

    enum CodingKeys: String, CodingKey {
        case isLiked = "is_liked"
        case likesCount = "likes_count"
    }
}

/// One post of a feed page: its count and whether the user likes it; with
/// `"include":["recent_likers"]`, its newest likers too (at most
/// `FeedQuery.recentLikersCount`, newest first: "liked by Ana, Luca and 1,234 others").
public struct FeedEntry: Sendable, Equatable, Codable {
    public let postID: Int64
    public let likesCount: Int64
    public let isLiked: Bool
    /// `nil` unless the query asked for them (then left out of the JSON).
    public let recentLikers: [Liker]?
    /// With `include` `reactions` (else `nil`, left out of the JSON): the post's kinds' counts,
    /// the largest first (at most `--reaction-summary-kinds` of them), the total of every kind,
    /// and the viewer's own kinds.
    public let reactions: [ReactionStatus.KindCount]?
    public let total: Int64?
    public let mine: [String]?

    public init(
        postID: Int64, likesCount: Int64, isLiked: Bool, recentLikers: [Liker]? = nil,
        reactions: [ReactionStatus.KindCount]? = nil, total: Int64? = nil, mine: [String]? = nil
    ) {
        self.postID = postID
        self.likesCount = likesCount
        self.isLiked = isLiked
        self.recentLikers = recentLikers
        self.reactions = reactions
        self.total = total
        self.mine = mine
    }

    enum CodingKeys: String, CodingKey {
        case postID = "post_id"
        case likesCount = "likes_count"
        case isLiked = "is_liked"
        case recentLikers = "recent_likers"
        case reactions
        case total
        case mine
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        postID = try container.decode(Int64.self, forKey: .postID)
        likesCount = try container.decode(Int64.self, forKey: .likesCount)
        isLiked = try container.decode(Bool.self, forKey: .isLiked)
        recentLikers = try container.decodeIfPresent([Liker].self, forKey: .recentLikers)
        if container.contains(.reactions) {
            let counts = try container.nestedContainer(keyedBy: ReactionStatus.KindKey.self, forKey: .reactions)
            reactions = try counts.allKeys.map { ReactionStatus.KindCount(kind: $0.stringValue, count: try counts.decode(Int64.self, forKey: $0)) }
                .sorted { $0.count != $1.count ? $0.count > $1.count : $0.kind < $1.kind }
        } else {
            reactions = nil
        }
        total = try container.decodeIfPresent(Int64.self, forKey: .total)
        mine = try container.decodeIfPresent([String].self, forKey: .mine)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(postID, forKey: .postID)
        try container.encode(likesCount, forKey: .likesCount)
        try container.encode(isLiked, forKey: .isLiked)
        if let recentLikers { try container.encode(recentLikers, forKey: .recentLikers) }
        if let reactions {
            var counts = container.nestedContainer(keyedBy: ReactionStatus.KindKey.self, forKey: .reactions)
            for item in reactions { try counts.encode(item.count, forKey: ReactionStatus.KindKey(stringValue: item.kind)) }
        }
        if let total { try container.encode(total, forKey: .total) }
        if let mine { try container.encode(mine, forKey: .mine) }
    }
}

/// The answer of `POST /v1/posts/query`: the posts that exist, in the order asked
/// (`{"posts":[{"post_id":1,"likes_count":3,"is_liked":true}]}`).
public struct FeedPage: Sendable, Equatable, Codable {
    public let posts: [FeedEntry]

    public init(posts: [FeedEntry]) {
        self.posts = posts
    }
}

/// Every error answer: `{"error":{"code":"post_not_found","message":"post 9 does not exist"}}`.
/// The code is stable and meant for programs; the message is for people.
public struct ErrorBody: Sendable, Equatable, Codable {
    public struct Detail: Sendable, Equatable, Codable {
        public let code: String
        public let message: String

        public init(code: String, message: String) {
            self.code = code
            self.message = message
        }
    }

    public let error: Detail

    public init(code: String, message: String) {
        error = Detail(code: code, message: message)
    }
}

/// The answer of `/healthz` (`{"status":"ok"}`) and of `/readyz` when ready (`{"status":"ready"}`,
/// with `warnings` while something is wrong that does not stop the node serving: PostgreSQL away
/// while the node's lease still holds, a failover, say).
public struct HealthStatus: Sendable, Equatable, Codable {
    public let status: String
    /// What is wrong without making the node unready; absent when nothing is.
    public let warnings: [String]?

    public init(status: String, warnings: [String]? = nil) {
        self.status = status
        self.warnings = warnings
    }

    private enum CodingKeys: String, CodingKey { case status, warnings }

    /// `warnings` only when there are some: `{"status":"ok"}` and `{"status":"ready"}` stay what
    /// probes and clients have always read (the wire writes other absent optionals as `null`).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(status, forKey: .status)
        if let warnings { try container.encode(warnings, forKey: .warnings) }
    }
}
