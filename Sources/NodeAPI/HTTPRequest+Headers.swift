import NodeHTTP

extension HTTPRequest {
    /// The `Counter-Forwarded-By` header: the node that forwarded this request to this one (a
    /// request is forwarded once at most).
    var forwardedBy: String? { headers["counter-forwarded-by"] }

    /// The `Counter-User` header: the user a trusted backend acts for on the user routes, when
    /// the node accepts the API token there.
    var actingUser: String? { headers["counter-user"] }
}
