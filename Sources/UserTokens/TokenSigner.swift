import COpenSSL
import CounterCore
import Foundation

/// Signs tokens the way an identity provider does, with OpenSSL: HS256 with a secret, RS256 and
/// ES256 with a key pair it generates. The tests and the bench mint the tokens the node verifies
/// with it; it can also print the key set (JWKS) a node is given for its key pair.
public final class TokenSigner: @unchecked Sendable {
    public enum Algorithm: String, Sendable {
        case hs256 = "HS256"
        case rs256 = "RS256"
        case es256 = "ES256"
    }

    public let algorithm: Algorithm
    /// The `kid` written into tokens and the key set.
    public let keyID: String?
    private let secret: [UInt8]
    /// The private key (RS256/ES256); immutable once generated.
    private let key: OpaquePointer?

    /// An HS256 signer.
    public init(secret: String, keyID: String? = nil) {
        algorithm = .hs256
        self.keyID = keyID
        self.secret = Array(secret.utf8)
        key = nil
    }

    /// An RS256 (2048-bit) or ES256 (P-256) signer with a new key pair.
    public init(generating algorithm: Algorithm, keyID: String?) {
        precondition(algorithm != .hs256, "HS256 signs with a secret")
        self.algorithm = algorithm
        self.keyID = keyID
        secret = []
        guard let key = counter_generate_key(algorithm == .rs256 ? 2_048 : 0) else { fatalError("OpenSSL could not generate a key") }
        self.key = key
    }

    deinit { if let key { EVP_PKEY_free(key) } }

    /// A token with `claims` (a JSON object), its header naming this signer's algorithm and key id
    /// (or `header`, given as JSON, to test what the node does with an odd one).
    public func token(claims: [String: Any], header: [String: Any]? = nil) -> String {
        var standard: [String: Any] = ["alg": algorithm.rawValue, "typ": "JWT"]
        if let keyID { standard["kid"] = keyID }
        let headerJSON = try! JSONSerialization.data(withJSONObject: header ?? standard, options: [.sortedKeys])
        let claimsJSON = try! JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys])
        let input = Base64URL.encode(headerJSON) + "." + Base64URL.encode(claimsJSON)
        return input + "." + Base64URL.encode(signature(of: Array(input.utf8)))
    }

    /// A token for `user` that expires `lifetime` seconds from now, with `extra` claims.
    public func token(user: Int64, lifetime: Double = 3_600, extra: [String: Any] = [:]) -> String {
        var claims = extra
        claims["sub"] = String(user)
        claims["exp"] = Int64(Date().timeIntervalSince1970 + lifetime)
        return token(claims: claims)
    }

    /// The signature of `message` as a JWT carries it.
    public func signature(of message: [UInt8]) -> [UInt8] {
        switch algorithm {
        case .hs256:
            return OpenSSLCalls.hmacSHA256(key: secret, message: message)
        case .rs256, .es256:
            var output = [UInt8](repeating: 0, count: 512)
            let length = counter_sign_sha256(key, message, message.count, &output, output.count)
            precondition(length > 0, "OpenSSL could not sign")
            guard algorithm == .es256 else { return Array(output.prefix(length)) }
            var raw = [UInt8](repeating: 0, count: 64)
            precondition(counter_ecdsa_der_to_raw(output, length, &raw) == 1)
            return raw
        }
    }

    /// This signer's public key as a JWK (a JSON object), for a JWKS document.
    public var publicJWK: [String: String] {
        var jwk: [String: String] = ["use": "sig", "alg": algorithm.rawValue]
        if let keyID { jwk["kid"] = keyID }
        switch algorithm {
        case .hs256:
            preconditionFailure("an HS256 secret has no public key")
        case .rs256:
            var buffer = [UInt8](repeating: 0, count: 1_024)
            let n = counter_rsa_component(key, "n", &buffer, Int32(buffer.count))
            jwk["kty"] = "RSA"
            jwk["n"] = Base64URL.encode(buffer.prefix(Int(n)))
            let e = counter_rsa_component(key, "e", &buffer, Int32(buffer.count))
            jwk["e"] = Base64URL.encode(buffer.prefix(Int(e)))
        case .es256:
            var point = [UInt8](repeating: 0, count: 133)
            let length = counter_ec_public_point(key, &point, point.count)
            precondition(length == 65, "a P-256 point is 65 bytes uncompressed")
            jwk["kty"] = "EC"
            jwk["crv"] = "P-256"
            jwk["x"] = Base64URL.encode(point[1..<33])
            jwk["y"] = Base64URL.encode(point[33..<65])
        }
        return jwk
    }

    /// The public key in PEM.
    public var publicPEM: String { OpenSSLCalls.publicPEM(of: key) }

    /// A JWKS document with `signers`' public keys.
    public static func keySet(_ signers: [TokenSigner]) -> Data {
        try! JSONSerialization.data(withJSONObject: ["keys": signers.map(\.publicJWK)], options: [.sortedKeys, .prettyPrinted])
    }
}
