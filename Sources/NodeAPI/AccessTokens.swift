/// The API and admin bearer tokens, compared in constant time.
public struct AccessTokens: Sendable, Equatable {
    /// Token for `/v1/…` (and `/metrics`); `nil` leaves those routes open.
    public var api: String?
    /// Token for `/admin/…` (and `/metrics`); `nil` leaves those routes open.
    public var admin: String?
    /// Token for `GET /v1/events` only (the admin token is also taken there); with neither set
    /// the route is open.
    public var events: String?

    public init(api: String? = nil, admin: String? = nil, events: String? = nil) {
        self.api = api
        self.admin = admin
        self.events = events
    }

    /// Why `authorization` does not grant `access`, or `nil` when it does.
    func refusal(_ authorization: String?, for access: Route.Access) -> String? {
        let accepted: [String]
        switch access {
        case .open: return nil
        case .api, .apiOrUser:
            accepted = [api, admin].compactMap { $0 }
            if api == nil { return nil }
        case .admin:
            accepted = [admin].compactMap { $0 }
            if admin == nil { return nil }
        case .any:
            accepted = [api, admin].compactMap { $0 }
            if accepted.isEmpty { return nil }
        case .events:
            accepted = [events, admin].compactMap { $0 }
            if accepted.isEmpty { return nil }
        case .user: return "the user routes take an end user's token"
        }
        guard let authorization, authorization.hasPrefix("Bearer ") else {
            return "missing bearer token: send Authorization: Bearer <token>"
        }
        let presented = Array(authorization.utf8.dropFirst(7))
        // Check every accepted token fully, so the time taken does not depend on which matched.
        var granted = false
        for token in accepted where Self.constantTimeEqual(presented, Array(token.utf8)) { granted = true }
        return granted ? nil : "invalid token"
    }

    /// Whether `token` is the API or the admin token (checked fully against both).
    func isServiceToken(_ token: [UInt8]) -> Bool {
        var matched = false
        for known in [api, admin].compactMap({ $0 }) where Self.constantTimeEqual(token, Array(known.utf8)) { matched = true }
        return matched
    }

    /// Compares without stopping at the first difference.
    static func constantTimeEqual(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        var difference = UInt8(truncatingIfNeeded: lhs.count ^ rhs.count)
        let length = max(lhs.count, rhs.count)
        for index in 0..<length {
            let left = index < lhs.count ? lhs[index] : 0
            let right = index < rhs.count ? rhs[index] : 0
            difference |= left ^ right
        }
        return difference == 0
    }
}
