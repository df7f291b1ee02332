import CounterCore

/// What a verified token's claims must say for the node to act for its user: not expired, already
/// valid, from the configured issuer, for the configured audience, and naming a user. Pure: the
/// time is given.
public struct ClaimRules: Sendable, Equatable {
    /// `iss` must equal this, when set.
    public var issuer: String?
    /// `aud` (a string, or an array of strings) must contain this, when set.
    public var audience: String?
    /// The claim that holds the user id: a positive 64-bit integer, in digits (a JSON string of
    /// digits, or a JSON integer).
    public var userClaim: String
    /// How far `exp` and `nbf` may be off, for clocks that differ a little.
    public var leewaySeconds: Int64

    public init(issuer: String? = nil, audience: String? = nil, userClaim: String = "sub", leewaySeconds: Int64 = 30) {
        self.issuer = issuer
        self.audience = audience
        self.userClaim = userClaim
        self.leewaySeconds = leewaySeconds
    }

    /// The user the claims name and when the token stops being accepted (`exp` plus the
    /// leeway, in seconds since 1970).
    public func check(_ claims: [String: ClaimValue], now: Double) throws(TokenRefusal) -> (user: Int64, acceptedUntil: Double) {
        guard let expiry = claims["exp"] else {
            throw TokenRefusal(.expired, "the token has no \"exp\" claim; tokens without an expiry are not accepted")
        }
        guard let expires = expiry.seconds else { throw TokenRefusal(.malformed, "\"exp\" is not a number of seconds") }
        let leeway = Double(leewaySeconds)
        guard now < expires + leeway else {
            throw TokenRefusal(.expired, "the token expired at \(Int64(expires)) (now \(Int64(now)), leeway \(leewaySeconds) s)")
        }
        if let notBefore = claims["nbf"] {
            guard let starts = notBefore.seconds else { throw TokenRefusal(.malformed, "\"nbf\" is not a number of seconds") }
            guard now >= starts - leeway else {
                throw TokenRefusal(.notYetValid, "the token is valid from \(Int64(starts)) (now \(Int64(now)), leeway \(leewaySeconds) s)")
            }
        }
        if let issuer {
            guard claims["iss"] == .string(issuer) else {
                throw TokenRefusal(.issuer, "the token's \"iss\" is not the issuer this service accepts")
            }
        }
        if let audience {
            let named: Bool
            switch claims["aud"] {
            case .string(let value)?: named = value == audience
            case .array(let values)?: named = values.contains(.string(audience))
            default: named = false
            }
            guard named else { throw TokenRefusal(.audience, "the token's \"aud\" does not name this service's audience") }
        }
        let user: Int64?
        switch claims[userClaim] {
        case .string(let text)?: user = EntityID.parse(text)
        case .integer(let value)? where value > 0: user = value
        default: user = nil
        }
        guard let user else {
            throw TokenRefusal(.userClaim, "the token's \"\(userClaim)\" claim is not a user id (a positive 64-bit integer in digits)")
        }
        return (user, expires + leeway)
    }
}
