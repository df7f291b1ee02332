import CounterWire

extension CounterServiceClient {
    // MARK: - Reactions, for backends (the API token; the user named)

    /// React to `post` with `kind` as `user` (idempotent: reacting with a kind held answers the
    /// state). With one kind per user, the kind held is replaced in the same step.
    public func react(post: Int64, kind: String, user: Int64) async throws(CounterClientError) -> ReactionStatus {
        try await call("PUT", try reactionPath(post, kind, user: user), idempotent: true, post: post)
    }

    /// Take `user`'s reaction of `kind` to `post` back (idempotent).
    public func unreact(post: Int64, kind: String, user: Int64) async throws(CounterClientError) -> ReactionStatus {
        try await call("DELETE", try reactionPath(post, kind, user: user), idempotent: true, post: post)
    }

    /// Toggle `user`'s reaction of `kind` to `post` (not idempotent: not repeated after a broken
    /// connection).
    public func toggleReaction(post: Int64, kind: String, user: Int64) async throws(CounterClientError) -> ReactionStatus {
        try await call("POST", try reactionPath(post, kind, user: user) + "/toggle", idempotent: false, post: post)
    }

    /// Sends the state the user wants of one kind: `react` or `unreact`.
    public func setReacted(_ reacted: Bool, post: Int64, kind: String, user: Int64) async throws(CounterClientError) -> ReactionStatus {
        reacted ? try await react(post: post, kind: kind, user: user) : try await unreact(post: post, kind: kind, user: user)
    }

    /// `post`'s reactions: each kind's count, the total, and `user`'s kinds (without a user, the
    /// counts alone).
    public func reactions(post: Int64, user: Int64? = nil) async throws(CounterClientError) -> ReactionStatus {
        try Self.positive(post, "post id")
        if let user { try Self.positive(user, "user id") }
        let query = user.map { "?user=\($0)" } ?? ""
        return try await call("GET", "/v1/posts/\(post)/reactions\(query)", idempotent: true, post: post)
    }

    /// A page of who reacted to `post` with `kind`, newest first: `limit` (1–100) after `cursor`
    /// (a page's `nextCursor`). As the signed-in user when `userToken` is configured, else with
    /// the API token.
    public func reactorsPage(of post: Int64, kind: String, limit: Int = 20, cursor: String? = nil) async throws(CounterClientError)
        -> ReactorsPage
    {
        try Self.positive(post, "post id")
        try Self.checkKind(kind)
        let path = try Self.listPath("/v1/posts/\(post)/reactions/\(kind)/users", limit: limit, cursor: cursor)
        return try await call("GET", path, credential: configuration.userToken == nil ? nil : .user, idempotent: true, post: post)
    }

    /// Every page of who reacted to `post` with `kind`, newest first.
    public func reactors(of post: Int64, kind: String, pageSize: Int = 20) -> ListPages<ReactorsPage> {
        ListPages(next: \.nextCursor) { cursor throws(CounterClientError) in
            try await reactorsPage(of: post, kind: kind, limit: pageSize, cursor: cursor)
        }
    }

    // MARK: - Reactions, for apps (the signed-in user's token)

    /// React to `post` with `kind` as the signed-in user (idempotent).
    public func react(post: Int64, kind: String) async throws(CounterClientError) -> ReactionStatus {
        try await call("PUT", try reactionPath(post, kind, user: nil), credential: .user, idempotent: true, post: post)
    }

    /// Take the signed-in user's reaction of `kind` back (idempotent).
    public func unreact(post: Int64, kind: String) async throws(CounterClientError) -> ReactionStatus {
        try await call("DELETE", try reactionPath(post, kind, user: nil), credential: .user, idempotent: true, post: post)
    }

    /// Toggle the signed-in user's reaction of `kind`.
    public func toggleReaction(post: Int64, kind: String) async throws(CounterClientError) -> ReactionStatus {
        try await call("POST", try reactionPath(post, kind, user: nil) + "/toggle", credential: .user, idempotent: false, post: post)
    }

    /// Sends the state the signed-in user wants of one kind.
    public func setReacted(_ reacted: Bool, post: Int64, kind: String) async throws(CounterClientError) -> ReactionStatus {
        reacted ? try await react(post: post, kind: kind) : try await unreact(post: post, kind: kind)
    }

    /// `post`'s reactions and the signed-in user's kinds.
    public func myReactions(post: Int64) async throws(CounterClientError) -> ReactionStatus {
        try Self.positive(post, "post id")
        return try await call("GET", "/v1/posts/\(post)/reactions", credential: .user, idempotent: true, post: post)
    }

    /// One page of `user`'s reactions of every kind (its likes as `like`), newest first (with the
    /// API token).
    public func reactionsPage(ofUser user: Int64, limit: Int = 20, cursor: String? = nil) async throws(CounterClientError)
        -> UserReactionsPage
    {
        try Self.positive(user, "user id")
        return try await call("GET", try Self.listPath("/v1/users/\(user)/reactions", limit: limit, cursor: cursor), idempotent: true)
    }

    /// Every page of `user`'s reactions, newest first (with the API token).
    public func reactions(ofUser user: Int64, pageSize: Int = 20) -> ListPages<UserReactionsPage> {
        ListPages(next: \.nextCursor) { cursor throws(CounterClientError) in
            try await reactionsPage(ofUser: user, limit: pageSize, cursor: cursor)
        }
    }

    /// One page of the signed-in user's reactions of every kind, newest first.
    public func myReactionsPage(limit: Int = 20, cursor: String? = nil) async throws(CounterClientError) -> UserReactionsPage {
        try await call("GET", try Self.listPath("/v1/me/reactions", limit: limit, cursor: cursor), credential: .user, idempotent: true)
    }

    /// Every page of the signed-in user's reactions, newest first: a "your reactions" screen.
    public func myReactions(pageSize: Int = 20) -> ListPages<UserReactionsPage> {
        ListPages(next: \.nextCursor) { cursor throws(CounterClientError) in try await myReactionsPage(limit: pageSize, cursor: cursor) }
    }

    private func reactionPath(_ post: Int64, _ kind: String, user: Int64?) throws(CounterClientError) -> String {
        try Self.positive(post, "post id")
        try Self.checkKind(kind)
        guard let user else { return "/v1/posts/\(post)/reactions/\(kind)" }
        try Self.positive(user, "user id")
        return "/v1/posts/\(post)/reactions/\(kind)/users/\(user)"
    }

    /// A kind is 1 to 32 characters of `a-z`, `0-9` and `_`: anything else is refused here,
    /// before a request.
    static func checkKind(_ kind: String) throws(CounterClientError) {
        let bytes = kind.utf8
        guard !bytes.isEmpty, bytes.count <= 32,
            bytes.allSatisfy({ ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 95 })
        else { throw .invalidArgument("\"\(kind)\" is not a reaction kind: 1 to 32 characters of a-z, 0-9 and _") }
    }
}
