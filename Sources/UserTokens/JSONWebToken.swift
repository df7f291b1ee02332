import CounterCore
import Foundation

/// A compact JWT (RFC 7519) taken apart: the header and claims decoded, the signed bytes and
/// the signature. Nothing here says whether it is genuine: `TokenVerifier` does. Pure.
public struct JSONWebToken: Sendable {
    /// The longest token accepted, in bytes: identity providers' tokens are well under 2 KiB,
    /// and a longer one only costs the node work.
    public static let maximumBytes = 8_192

    public struct Header: Decodable, Sendable {
        public let alg: String
        public let kid: String?
        public let typ: String?
        /// Extensions the issuer says must be understood; none are, so any is refused.
        public let crit: [String]?
    }

    public let header: Header
    public let claims: [String: ClaimValue]
    /// `header.payload`, the bytes the signature covers.
    public let signingInput: [UInt8]
    public let signature: [UInt8]

    /// Splits and decodes `token`.
    /// - Throws: `TokenRefusal` `.malformed` for anything that is not a well-formed JWS
    ///   compact serialisation of a JSON header and JSON claims object.
    public static func parse(_ token: [UInt8]) throws(TokenRefusal) -> JSONWebToken {
        guard token.count <= maximumBytes else {
            throw TokenRefusal(.malformed, "the token is longer than \(maximumBytes) bytes")
        }
        let parts = token.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3 else {
            throw TokenRefusal(.malformed, "a token has three base64url parts separated by dots; this one has \(parts.count)")
        }
        guard let headerBytes = Base64URL.decode(parts[0]), let claimBytes = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2])
        else {
            throw TokenRefusal(.malformed, "a part of the token is not unpadded base64url")
        }
        let header: Header
        do {
            header = try JSONDecoder().decode(Header.self, from: Data(headerBytes))
        } catch {
            throw TokenRefusal(.malformed, "the token's header is not a JSON object with a string \"alg\"")
        }
        if let critical = header.crit {
            throw TokenRefusal(.malformed, "the token needs extensions this service does not know: \(critical.joined(separator: ", "))")
        }
        let claims: [String: ClaimValue]
        do {
            claims = try JSONDecoder().decode([String: ClaimValue].self, from: Data(claimBytes))
        } catch {
            throw TokenRefusal(.malformed, "the token's claims are not a JSON object")
        }
        let signingInput = Array(token[token.startIndex..<parts[1].endIndex])
        return JSONWebToken(header: header, claims: claims, signingInput: signingInput, signature: signature)
    }
}

/// One claim's JSON value.
public enum ClaimValue: Decodable, Sendable, Equatable {
    case string(String)
    case integer(Int64)
    case number(Double)
    case bool(Bool)
    case array([ClaimValue])
    case object([String: ClaimValue])
    case null

    public init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode([ClaimValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: ClaimValue].self))
        }
    }

    /// A time claim (`exp`, `nbf`): seconds since 1970, possibly with a fraction.
    var seconds: Double? {
        switch self {
        case .integer(let value): return Double(value)
        case .number(let value) where value.isFinite: return value
        default: return nil
        }
    }
}
