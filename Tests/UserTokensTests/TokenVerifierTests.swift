import CounterCore
import Foundation
import Testing
import UserTokens

@Suite("End-user token verification")
struct TokenVerifierTests {
    static let secret = "a-shared-secret-of-at-least-32-bytes!"
    static let hs = TokenSigner(secret: secret)
    static let rs = TokenSigner(generating: .rs256, keyID: "rsa-1")
    static let es = TokenSigner(generating: .es256, keyID: "ec-1")

    /// A verifier for all three algorithms: the shared secret, and a key set with `rs` and `es`.
    static func verifier(rules: ClaimRules = ClaimRules()) throws -> TokenVerifier {
        let verifier = TokenVerifier(secret: HMACSecret(secret)!, keySet: true, rules: rules)
        let (keys, skipped) = try JSONWebKeySet.parse(TokenSigner.keySet([rs, es]))
        #expect(skipped.isEmpty)
        verifier.replaceKeys(keys)
        return verifier
    }

    static func refusal(_ token: String, _ verifier: TokenVerifier, now: Double = Date().timeIntervalSince1970) -> TokenRefusal? {
        do {
            _ = try verifier.user(of: Array(token.utf8), now: now)
            return nil
        } catch {
            return error
        }
    }

    @Test("a valid token of each algorithm names its user", arguments: ["HS256", "RS256", "ES256"])
    func validTokens(algorithm: String) throws {
        let signer = [Self.hs, Self.rs, Self.es].first { $0.algorithm.rawValue == algorithm }!
        let verifier = try Self.verifier()
        #expect(try verifier.user(of: Array(signer.token(user: 42).utf8)) == 42)
    }

    @Test("expired, not yet valid, and without exp: refused with their codes; the leeway is honoured")
    func times() throws {
        let verifier = try Self.verifier(rules: ClaimRules(leewaySeconds: 30))
        let now = Date().timeIntervalSince1970
        for signer in [Self.hs, Self.rs, Self.es] {
            #expect(Self.refusal(signer.token(user: 1, lifetime: -31), verifier)?.code == .expired)
            #expect(Self.refusal(signer.token(user: 1, lifetime: -20), verifier) == nil, "inside the leeway")
            #expect(Self.refusal(signer.token(claims: ["sub": "1", "exp": now + 600, "nbf": now + 60]), verifier)?.code == .notYetValid)
            #expect(Self.refusal(signer.token(claims: ["sub": "1", "exp": now + 600, "nbf": now + 20]), verifier) == nil)
            #expect(Self.refusal(signer.token(claims: ["sub": "1"]), verifier)?.code == .expired)
            #expect(Self.refusal(signer.token(claims: ["sub": "1", "exp": "tomorrow"]), verifier)?.code == .malformed)
        }
    }

    @Test("a remembered token still stops at its expiry")
    func cachedExpiry() throws {
        let verifier = try Self.verifier(rules: ClaimRules(leewaySeconds: 0))
        let now = Date().timeIntervalSince1970
        let token = Array(Self.hs.token(claims: ["sub": "9", "exp": now + 10]).utf8)
        #expect(try verifier.user(of: token, now: now) == 9)
        #expect(verifier.rememberedTokens == 1)
        #expect(throws: TokenRefusal.self) { try verifier.user(of: token, now: now + 11) }
    }

    @Test("a signature by another key or secret is refused")
    func wrongSignature() throws {
        let verifier = try Self.verifier()
        let otherSecret = TokenSigner(secret: "another-shared-secret-of-32-bytes-or-more")
        let otherRSA = TokenSigner(generating: .rs256, keyID: "rsa-1")
        let otherEC = TokenSigner(generating: .es256, keyID: "ec-1")
        for signer in [otherSecret, otherRSA, otherEC] {
            #expect(Self.refusal(signer.token(user: 1), verifier)?.code == .signature)
        }
        // One byte of the claims changed after signing.
        let token = Self.rs.token(user: 1)
        let parts = token.split(separator: ".")
        let forged = try JSONSerialization.data(withJSONObject: ["sub": "2", "exp": Date().timeIntervalSince1970 + 60])
        #expect(Self.refusal("\(parts[0]).\(Base64URL.encode(forged)).\(parts[2])", verifier)?.code == .signature)
        // An unknown kid.
        let stranger = TokenSigner(generating: .es256, keyID: "ec-9")
        #expect(Self.refusal(stranger.token(user: 1), verifier)?.message.contains("ec-9") == true)
    }

    @Test("iss and aud are checked when configured: a string or an array naming the audience")
    func issuerAndAudience() throws {
        let verifier = try Self.verifier(rules: ClaimRules(issuer: "https://id.example", audience: "likes"))
        let good: [String: Any] = ["iss": "https://id.example", "aud": "likes"]
        #expect(Self.refusal(Self.es.token(user: 3, extra: good), verifier) == nil)
        #expect(Self.refusal(Self.es.token(user: 3, extra: ["iss": "https://id.example", "aud": ["other", "likes"]]), verifier) == nil)
        #expect(Self.refusal(Self.es.token(user: 3, extra: ["iss": "https://id.example", "aud": "other"]), verifier)?.code == .audience)
        #expect(Self.refusal(Self.es.token(user: 3, extra: ["iss": "https://id.example"]), verifier)?.code == .audience)
        #expect(Self.refusal(Self.es.token(user: 3, extra: ["iss": "https://evil.example", "aud": "likes"]), verifier)?.code == .issuer)
        #expect(Self.refusal(Self.es.token(user: 3, extra: ["aud": "likes"]), verifier)?.code == .issuer)
    }

    @Test("alg none, unknown algorithms and algorithm confusion are refused")
    func algorithms() throws {
        let verifier = try Self.verifier()
        let exp = Date().timeIntervalSince1970 + 60
        let claims = Base64URL.encode(try JSONSerialization.data(withJSONObject: ["sub": "1", "exp": exp]))
        for alg in ["none", "None", "HS512", "PS256", ""] {
            let header = Base64URL.encode(try JSONSerialization.data(withJSONObject: ["alg": alg]))
            #expect(Self.refusal("\(header).\(claims).", verifier)?.code == .algorithm, "alg \(alg)")
        }
        // An HS256 token whose "secret" is the RSA public key: an HS256 check against a public
        // key would accept it. Without a secret configured, HS256 is refused outright…
        let confused = TokenSigner(secret: Self.rs.publicPEM)
        let keysOnly = TokenVerifier(secret: nil, keySet: true, rules: ClaimRules())
        keysOnly.replaceKeys(try JSONWebKeySet.parse(TokenSigner.keySet([Self.rs])).keys)
        #expect(Self.refusal(confused.token(user: 1), keysOnly)?.code == .algorithm)
        // …and with one, it is checked against the secret only.
        #expect(Self.refusal(confused.token(user: 1), verifier)?.code == .signature)
        // An RS256 header on an ES256 signature, and the other way round.
        let rsClaims = Self.es.token(user: 1).split(separator: ".")
        let rsHeader = Base64URL.encode(try JSONSerialization.data(withJSONObject: ["alg": "RS256", "kid": "ec-1"]))
        #expect(Self.refusal("\(rsHeader).\(rsClaims[1]).\(rsClaims[2])", verifier)?.code == .signature)
        // A secret-only verifier refuses RS256.
        let secretOnly = TokenVerifier(secret: HMACSecret(Self.secret)!, keySet: false, rules: ClaimRules())
        #expect(Self.refusal(Self.rs.token(user: 1), secretOnly)?.code == .algorithm)
    }

    @Test("malformed tokens: parts, base64url, JSON, crit, size")
    func malformed() throws {
        let verifier = try Self.verifier()
        let good = Self.hs.token(user: 1).split(separator: ".").map(String.init)
        let cases = [
            "", "abc", "a.b", "\(good[0]).\(good[1])", "\(good[0]).\(good[1]).\(good[2]).x",
            "\(good[0])=.\(good[1]).\(good[2])", "\(good[0]).\(good[1])+.\(good[2])", "\(good[0]).\(good[1]).\(good[2]) ",
            "\(Base64URL.encode(Array("not json".utf8))).\(good[1]).\(good[2])",
            "\(good[0]).\(Base64URL.encode(Array("[1,2]".utf8))).\(good[2])",
            "\(Base64URL.encode(Array(#"{"alg":"HS256","crit":["exp"]}"#.utf8))).\(good[1]).\(good[2])",
            "\(Base64URL.encode(Array(#"{"alg":256}"#.utf8))).\(good[1]).\(good[2])",
            "\(good[0]).\(good[1]).A",
        ]
        for token in cases {
            #expect(Self.refusal(token, verifier)?.code == .malformed, "\(token)")
        }
        let huge = Self.hs.token(user: 1, extra: ["pad": String(repeating: "x", count: 9_000)])
        #expect(Self.refusal(huge, verifier)?.message.contains("longer than") == true)
    }

    @Test("the user claim: digits (a string or an integer), positive, 64 bits; another claim when configured")
    func userClaim() throws {
        let verifier = try Self.verifier()
        let exp = Date().timeIntervalSince1970 + 60
        #expect(try verifier.user(of: Array(Self.hs.token(claims: ["sub": 77, "exp": exp]).utf8)) == 77)
        #expect(try verifier.user(of: Array(Self.hs.token(claims: ["sub": "9223372036854775807", "exp": exp]).utf8)) == Int64.max)
        for bad: Any in ["abc", "12a", "-5", "0", "+5", " 5", "9223372036854775808", "", 0, -3, 1.5, true, ["1"], NSNull()] {
            #expect(Self.refusal(Self.hs.token(claims: ["sub": bad, "exp": exp]), verifier)?.code == .userClaim, "\(bad)")
        }
        #expect(Self.refusal(Self.hs.token(claims: ["exp": exp]), verifier)?.code == .userClaim)
        let byUID = try Self.verifier(rules: ClaimRules(userClaim: "uid"))
        #expect(try byUID.user(of: Array(Self.hs.token(claims: ["sub": "auth0|abc", "uid": "15", "exp": exp]).utf8)) == 15)
    }

    @Test("withdrawing a key from the key set forgets the tokens verified with it")
    func keyWithdrawal() throws {
        let verifier = try Self.verifier()
        let token = Array(Self.rs.token(user: 5).utf8)
        #expect(try verifier.user(of: token) == 5)
        #expect(verifier.replaceKeys(try JSONWebKeySet.parse(TokenSigner.keySet([Self.es])).keys))
        #expect(throws: TokenRefusal.self) { try verifier.user(of: token) }
        // Reading the same set again changes nothing.
        #expect(!verifier.replaceKeys(try JSONWebKeySet.parse(TokenSigner.keySet([Self.es])).keys))
    }

    @Test("a key set skips what it cannot use, and says why")
    func keySetSkips() throws {
        var rsa = Self.rs.publicJWK
        rsa["use"] = "enc"
        var curve = Self.es.publicJWK
        curve["crv"] = "P-384"
        var offCurve = Self.es.publicJWK
        offCurve["kid"] = "off"
        offCurve["y"] = offCurve["x"]
        let short = ["kty": "RSA", "kid": "short", "n": Base64URL.encode([UInt8](repeating: 0xC1, count: 128)), "e": "AQAB"]
        let document = try JSONSerialization.data(withJSONObject: [
            "keys": [rsa, curve, offCurve, short, ["kty": "oct", "k": "abc"], Self.es.publicJWK]
        ])
        let (keys, skipped) = try JSONWebKeySet.parse(document)
        #expect(keys.map(\.id) == ["ec-1"])
        #expect(skipped.count == 5, "\(skipped)")
        #expect(throws: JSONWebKeySet.Error.self) { try JSONWebKeySet.parse(Data("[]".utf8)) }
    }

    @Test("base64url: round trips, and refuses padding, other alphabets and non-canonical endings")
    func base64URL() {
        for length in 0..<40 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            #expect(Base64URL.decode(Base64URL.encode(bytes).utf8) == bytes)
        }
        #expect(Base64URL.encode(Array("hello?>".utf8)) == "aGVsbG8_Pg")
        for bad in ["aGVsbG8=", "aGVs+G8", "aGVs/G8", "a", "aGVsbG9", "aG Vs"] {
            #expect(Base64URL.decode(bad.utf8) == nil, "\(bad)")
        }
    }
}
