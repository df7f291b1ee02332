/// Every route of the HTTP API, each declared once: its path (also its metrics label and its path
/// in `docs/openapi.yaml`), its methods, who may call it, what the middleware does around it
/// (`RequestChain`), the error codes its handler answers, and the handler, by area. Matching,
/// `405`'s `Allow`, the metrics' labels and the document's check (`OpenAPIDocumentTests`) all
/// read this table. A new route is a line here and a handler.
enum APIRoutes {
    static let table = RouteTable([
        // Likes, for backends: the user in the path. The hot routes, first.
        Route(
            "/v1/posts/{post}/likes/{user}/toggle", .post, access: .api, forwarding: .toOwner(repeatable: false),
            errors: [.postNotFound] + ErrorCode.writePath, .like(LikeRoute(.toggle))),
        Route(
            "/v1/posts/{post}/likes/{user}", .get, .put, .delete, access: .api, forwarding: .toOwner(repeatable: true),
            errors: [.postNotFound] + ErrorCode.writePath, .like(LikeRoute(.byMethod))),
        // Likes, for apps: the user is the token's; writes count against the user's rate.
        Route(
            "/v1/posts/{post}/like/toggle", .post, access: .user, forwarding: .toOwner(repeatable: false), rateLimited: true,
            errors: [.postNotFound] + ErrorCode.writePath, .like(LikeRoute(.toggle))),
        Route(
            "/v1/posts/{post}/like", .get, .put, .delete, access: .user, forwarding: .toOwner(repeatable: true), rateLimited: true,
            errors: [.postNotFound] + ErrorCode.writePath, .like(LikeRoute(.byMethod))),
        Route(
            "/api/posts/{id}/like", .post, access: .user, forwarding: .toOwner(repeatable: false), rateLimited: true, onlyWith: .seedRoute,
            errors: [.postNotFound] + ErrorCode.writePath, .like(LikeRoute(.toggle, answer: .seed))),
        Route(
            "/v1/posts/{post}", .get, access: .api, forwarding: .toOwner(repeatable: true),
            errors: [.postNotFound] + ErrorCode.writePath, .task(LikeHandlers.count)),
        // A forwarded page for posts this node does not own is answered 421 (or 503 no_owner).
        Route(
            "/v1/posts/query", .post, access: .apiOrUser,
            errors: ErrorCode.body + [.forbidden, .notOwner] + ErrorCode.writePath, .task(LikeHandlers.feed)),

        // Reactions, for backends: the kind and the user in the path. Every answer is the post's
        // summary after the change (`ReactionStatus`).
        Route(
            "/v1/posts/{post}/reactions/{kind}/users/{user}/toggle", .post, access: .api, forwarding: .toOwner(repeatable: false),
            errors: ErrorCode.reactionWrite + ErrorCode.writePath, .like(LikeRoute(.toggle, answer: .reactionStatus))),
        Route(
            "/v1/posts/{post}/reactions/{kind}/users/{user}", .put, .delete, access: .api, forwarding: .toOwner(repeatable: true),
            errors: ErrorCode.reactionWrite + ErrorCode.writePath, .like(LikeRoute(.byMethod, answer: .reactionStatus))),
        // Reactions, for apps: the user is the token's.
        Route(
            "/v1/posts/{post}/reactions/{kind}/toggle", .post, access: .user, forwarding: .toOwner(repeatable: false), rateLimited: true,
            errors: ErrorCode.reactionWrite + ErrorCode.writePath, .like(LikeRoute(.toggle, answer: .reactionStatus))),
        Route(
            "/v1/posts/{post}/reactions/{kind}", .put, .delete, access: .user, forwarding: .toOwner(repeatable: true), rateLimited: true,
            errors: ErrorCode.reactionWrite + ErrorCode.writePath, .like(LikeRoute(.byMethod, answer: .reactionStatus))),
        Route(
            "/v1/posts/{post}/reactions", .get, access: .apiOrUser, forwarding: .toOwner(repeatable: true),
            errors: [.postNotFound, .forbidden] + ErrorCode.writePath, .task(ReactionHandlers.summary)),
        Route(
            "/v1/posts/{post}/reactions/{kind}/users", .get, access: .apiOrUser, forwarding: .toOwner(repeatable: true),
            errors: [.invalidCursor, .postNotFound, .unknownKind] + ErrorCode.writePath, .task(ReactionHandlers.reactors)),

        // The lists.
        Route(
            "/v1/posts/{post}/likers", .get, access: .apiOrUser, forwarding: .toOwner(repeatable: true),
            errors: [.invalidArgument, .invalidCursor, .postNotFound] + ErrorCode.writePath, .task(ListHandlers.likers)),
        Route(
            "/v1/users/{user}/likes", .get, access: .apiOrUser,
            errors: [.forbidden, .invalidArgument, .invalidCursor] + ErrorCode.writePath, .task(ListHandlers.userLikes)),
        Route(
            "/v1/me/likes", .get, access: .user,
            errors: [.invalidArgument, .invalidCursor] + ErrorCode.writePath, .task(ListHandlers.myLikes)),
        Route(
            "/v1/users/{user}/reactions", .get, access: .apiOrUser,
            errors: [.forbidden, .invalidArgument, .invalidCursor] + ErrorCode.writePath, .task(ListHandlers.userReactions)),
        Route(
            "/v1/me/reactions", .get, access: .user,
            errors: [.invalidArgument, .invalidCursor] + ErrorCode.writePath, .task(ListHandlers.myReactions)),
        Route(
            "/v1/users/{user}/likes/pending", .get, access: .apiOrUser,
            errors: [.forbidden] + ErrorCode.writePath, .task(ListHandlers.pending)),

        // The change events.
        Route(
            "/v1/events", .get, access: .events,
            errors: [.invalidArgument, .eventsOff, .eventsPruned, .unavailable], .task(EventHandlers.page)),

        // The cluster.
        Route("/v1/cluster", .get, access: .any, errors: [.notClustered], .task(ClusterHandlers.map)),
        // Each request of a batch carries its own credentials.
        Route(ForwardedBatches.path, .post, access: .open, errors: [.invalidArgument], .task(ForwardedBatches.answer)),
        Route(
            "/admin/cluster/drain", .post, access: .admin,
            errors: ErrorCode.body + [.notClustered, .nodeNotFound, .unavailable], .task(ClusterHandlers.drain)),

        // For operators' tools.
        Route("/healthz", .get, access: .open, .instant(OperationHandlers.health)),
        Route("/readyz", .get, access: .open, errors: [.notReady], .task(OperationHandlers.readiness)),
        Route("/metrics", .get, access: .any, .task(OperationHandlers.metrics)),
        Route("/openapi.json", .get, access: .open, .instant(OperationHandlers.openAPI)),

        // Admin, on this node.
        Route("/admin/flush", .post, access: .admin, errors: [.invalidArgument] + ErrorCode.writePath, .task(AdminHandlers.flush)),
        Route("/admin/stats", .get, access: .admin, .task(AdminHandlers.stats)),
        Route("/admin/posts/{post}", .get, access: .admin, errors: [.invalidID] + ErrorCode.writePath, .task(AdminHandlers.inspect)),
        Route("/admin/reconcile", .post, access: .admin, errors: ErrorCode.body + ErrorCode.writePath, .task(AdminHandlers.reconcile)),
        Route("/admin/dead-letters", .get, access: .admin, errors: [.invalidArgument, .unavailable], .task(AdminHandlers.deadLetters)),
        Route("/admin/dead-letters/replay", .post, access: .admin, errors: ErrorCode.body + ErrorCode.writePath, .task(AdminHandlers.replay)),
        Route("/admin/dead-letters/drop", .post, access: .admin, errors: ErrorCode.body + [.unavailable], .task(AdminHandlers.drop)),

        // Admin, on every live node of the cluster, answers merged.
        Route("/admin/cluster/flush", .post, access: .admin, errors: [.invalidArgument], .task(ClusterAdminHandlers.flush)),
        Route("/admin/cluster/stats", .get, access: .admin, .task(ClusterAdminHandlers.stats)),
        Route("/admin/cluster/reconcile", .post, access: .admin, errors: ErrorCode.body + [.unavailable], .task(ClusterAdminHandlers.reconcile)),
        Route(
            "/admin/cluster/dead-letters/replay", .post, access: .admin, errors: ErrorCode.body + [.unavailable],
            .task(ClusterAdminHandlers.replay)),
    ])
}
