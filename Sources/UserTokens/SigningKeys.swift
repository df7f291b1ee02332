import COpenSSL

/// A public key that verifies token signatures: RSA for RS256, P-256 for ES256. Wraps OpenSSL's
/// `EVP_PKEY`, which is safe to use from several threads at once while nothing changes it (and
/// nothing does after `init`).
public final class PublicKey: @unchecked Sendable {
    public enum Kind: String, Sendable {
        case rsa = "RS256"
        case p256 = "ES256"
    }

    /// The shortest RSA modulus accepted, in bits (shorter keys are forgeable).
    public static let minimumRSABits: Int32 = 2_048

    public let kind: Kind
    /// The key's `kid` in its key set; `nil` for a key without one.
    public let id: String?
    let key: OpaquePointer

    private init(kind: Kind, id: String?, key: OpaquePointer) {
        self.kind = kind
        self.id = id
        self.key = key
    }

    deinit { EVP_PKEY_free(key) }

    /// An RSA key from a JWK's `n` and `e`; `nil` when OpenSSL refuses them or the modulus is
    /// shorter than `minimumRSABits`.
    public static func rsa(modulus: [UInt8], exponent: [UInt8], id: String?) -> PublicKey? {
        guard let key = counter_rsa_public_key(modulus, modulus.count, exponent, exponent.count) else { return nil }
        guard EVP_PKEY_get_bits(key) >= minimumRSABits else {
            EVP_PKEY_free(key)
            return nil
        }
        return PublicKey(kind: .rsa, id: id, key: key)
    }

    /// A P-256 key from a JWK's `x` and `y` (32 bytes each); `nil` when the point is not on the curve.
    public static func p256(x: [UInt8], y: [UInt8], id: String?) -> PublicKey? {
        guard x.count == 32, y.count == 32 else { return nil }
        let point = [0x04] + x + y
        guard let key = counter_p256_public_key(point, point.count) else { return nil }
        return PublicKey(kind: .p256, id: id, key: key)
    }

    /// A key from PEM (`-----BEGIN PUBLIC KEY-----`), RSA or P-256.
    public static func pem(_ text: String, id: String? = nil) -> PublicKey? {
        let bytes = Array(text.utf8)
        guard
            let key = bytes.withUnsafeBufferPointer({ buffer in
                buffer.withMemoryRebound(to: CChar.self) { counter_public_key_from_pem($0.baseAddress, $0.count) }
            })
        else { return nil }
        switch EVP_PKEY_get_base_id(key) {
        case EVP_PKEY_RSA where EVP_PKEY_get_bits(key) >= minimumRSABits:
            return PublicKey(kind: .rsa, id: id, key: key)
        case EVP_PKEY_EC where EVP_PKEY_get_bits(key) == 256:
            return PublicKey(kind: .p256, id: id, key: key)
        default:
            EVP_PKEY_free(key)
            return nil
        }
    }

    /// Whether `signature` — as a JWT carries it: PKCS #1 v1.5 for RS256, `r || s` for ES256 —
    /// signs `message` with SHA-256 under this key.
    public func verifies(_ signature: [UInt8], of message: [UInt8]) -> Bool {
        switch kind {
        case .rsa:
            return counter_verify_sha256(key, message, message.count, signature, signature.count) == 1
        case .p256:
            guard signature.count == 64 else { return false }
            var der = [UInt8](repeating: 0, count: 80)
            let length = counter_ecdsa_raw_to_der(signature, &der, Int32(der.count))
            guard length > 0 else { return false }
            return counter_verify_sha256(key, message, message.count, der, Int(length)) == 1
        }
    }
}

/// The shared secret of HS256 (HMAC with SHA-256).
public struct HMACSecret: Sendable, Equatable {
    /// RFC 7518 §3.2: a key at least as long as the hash's output.
    public static let minimumBytes = 32

    let bytes: [UInt8]

    /// `nil` when `secret` is shorter than `minimumBytes`.
    public init?(_ secret: String) {
        guard secret.utf8.count >= Self.minimumBytes else { return nil }
        bytes = Array(secret.utf8)
    }

    /// HMAC-SHA256 of `message`.
    public func signature(of message: [UInt8]) -> [UInt8] {
        OpenSSLCalls.hmacSHA256(key: bytes, message: message)
    }

    /// Whether `signature` is this secret's HMAC of `message`, compared in constant time.
    public func verifies(_ signature: [UInt8], of message: [UInt8]) -> Bool {
        let expected = self.signature(of: message)
        guard signature.count == expected.count else { return false }
        return CRYPTO_memcmp(signature, expected, expected.count) == 0
    }
}

/// SHA-256, for keying the verified-token cache.
public struct TokenDigest: Hashable, Sendable {
    let words: (UInt64, UInt64, UInt64, UInt64)

    public init(of bytes: [UInt8]) {
        var digest = [UInt8](repeating: 0, count: 32)
        _ = SHA256(bytes, bytes.count, &digest)
        words = digest.withUnsafeBytes { raw in
            (
                raw.load(fromByteOffset: 0, as: UInt64.self), raw.load(fromByteOffset: 8, as: UInt64.self),
                raw.load(fromByteOffset: 16, as: UInt64.self), raw.load(fromByteOffset: 24, as: UInt64.self)
            )
        }
    }

    public static func == (lhs: TokenDigest, rhs: TokenDigest) -> Bool {
        lhs.words == rhs.words
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
    }

    /// A small number from the digest, to pick a cache shard.
    var shard: Int { Int(truncatingIfNeeded: words.2 & 0xF) }
}

extension PublicKey {
    /// The key in PEM (`-----BEGIN PUBLIC KEY-----`).
    public var publicPEM: String { OpenSSLCalls.publicPEM(of: key) }
}

/// OpenSSL calls that the verifying and the signing side share.
enum OpenSSLCalls {
    static func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        _ = key.withUnsafeBytes { raw in
            HMAC(EVP_sha256(), raw.baseAddress, Int32(raw.count), message, message.count, &output, &length)
        }
        return Array(output.prefix(Int(length)))
    }

    /// `key`'s public half in PEM.
    static func publicPEM(of key: OpaquePointer?) -> String {
        var output = [CChar](repeating: 0, count: 4_096)
        let length = counter_public_key_pem(key, &output, output.count)
        return String(decoding: output.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
