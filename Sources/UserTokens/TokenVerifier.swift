import Foundation
import Synchronization

/// Decides whether an end-user token is genuine and current, and whose it is: the signature
/// (HS256 with the shared secret; RS256 or ES256 with a key of the key set), then the claims
/// (`ClaimRules`). The algorithm a token names must be one a configured key is for — `none` is
/// never accepted, and an HS256 token is never checked against a public key (algorithm
/// confusion). Tokens verified once are remembered until they expire (`VerifiedTokenCache`).
/// Safe to call from any thread.
public final class TokenVerifier: Sendable {
    public let rules: ClaimRules
    private let secret: HMACSecret?
    private let keys: Mutex<[PublicKey]>
    private let cache: VerifiedTokenCache
    private let hasKeySet: Bool

    /// - Parameters:
    ///   - secret: the HS256 shared secret; `nil`: HS256 tokens are refused.
    ///   - keySet: whether RS256/ES256 keys come from a key set (`replaceKeys`); without one, and
    ///     without a secret, every token is refused.
    ///   - cacheCapacity: verified tokens remembered (per generation; see `VerifiedTokenCache`).
    public init(secret: HMACSecret?, keySet: Bool, rules: ClaimRules, cacheCapacity: Int = 100_000) {
        self.secret = secret
        self.hasKeySet = keySet
        self.rules = rules
        self.keys = Mutex([])
        self.cache = VerifiedTokenCache(capacity: cacheCapacity)
    }

    /// Makes `keys` the key set. When a key that was there is gone, the remembered tokens are
    /// forgotten, so a token signed with a withdrawn key stops working at once.
    /// - Returns: whether the set changed.
    @discardableResult
    public func replaceKeys(_ keys: [PublicKey]) -> Bool {
        let (changed, removed) = self.keys.withLock { current -> (Bool, Bool) in
            let before = Set(current.map(\.fingerprint))
            let after = Set(keys.map(\.fingerprint))
            current = keys
            return (before != after, !before.isSubset(of: after))
        }
        if removed { cache.removeAll() }
        return changed
    }

    /// The ids (`kid`) of the keys in the key set, for logs.
    public var keyIDs: [String] { keys.withLock { $0.map { $0.id ?? "(no kid)" } } }

    /// Tokens remembered as verified.
    public var rememberedTokens: Int { cache.count }

    /// The user `token` acts for.
    /// - Parameter now: seconds since 1970.
    /// - Throws: `TokenRefusal`, saying why the token is not accepted.
    public func user(of token: [UInt8], now: Double = Date().timeIntervalSince1970) throws(TokenRefusal) -> Int64 {
        guard token.count <= JSONWebToken.maximumBytes else {
            throw TokenRefusal(.malformed, "the token is longer than \(JSONWebToken.maximumBytes) bytes")
        }
        let digest = TokenDigest(of: token)
        if let user = cache.user(for: digest, now: now) { return user }
        let parsed = try JSONWebToken.parse(token)
        try checkSignature(parsed)
        let (user, acceptedUntil) = try rules.check(parsed.claims, now: now)
        cache.remember(user, acceptedUntil: acceptedUntil, for: digest)
        return user
    }

    private func checkSignature(_ token: JSONWebToken) throws(TokenRefusal) {
        switch token.header.alg {
        case "HS256":
            guard let secret else {
                throw TokenRefusal(.algorithm, "HS256 tokens are not accepted here (no shared secret is configured)")
            }
            guard secret.verifies(token.signature, of: token.signingInput) else {
                throw TokenRefusal(.signature, "the signature does not verify with the shared secret")
            }
        case "RS256", "ES256":
            let kind: PublicKey.Kind = token.header.alg == "RS256" ? .rsa : .p256
            guard hasKeySet else {
                throw TokenRefusal(.algorithm, "\(token.header.alg) tokens are not accepted here (no key set is configured)")
            }
            let candidates = keys.withLock { keys in
                // A key without an id (one PEM key) is tried whatever the token's kid.
                keys.filter { $0.kind == kind && (token.header.kid == nil || $0.id == nil || $0.id == token.header.kid) }
            }
            guard !candidates.isEmpty else {
                if let kid = token.header.kid {
                    throw TokenRefusal(.signature, "no \(token.header.alg) key \"\(kid)\" is in the key set")
                }
                throw TokenRefusal(.signature, "the key set has no \(token.header.alg) key")
            }
            guard candidates.contains(where: { $0.verifies(token.signature, of: token.signingInput) }) else {
                throw TokenRefusal(.signature, "the signature does not verify with the key set's \(token.header.alg) key")
            }
        case "none", "None", "NONE":
            throw TokenRefusal(.algorithm, "unsigned tokens (alg \"none\") are never accepted")
        default:
            throw TokenRefusal(.algorithm, "algorithm \"\(token.header.alg)\" is not accepted; use HS256, RS256 or ES256")
        }
    }
}

extension PublicKey {
    /// What tells two keys apart when a key set is read again: its id, kind and public bytes.
    var fingerprint: String {
        "\(kind.rawValue)/\(id ?? "")/\(publicPEM)"
    }
}
