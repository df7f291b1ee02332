/// Why an end-user token was not accepted: a code for programs (the API's error code) and a
/// message for people. Every refusal is answered `401`.
public struct TokenRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable, CaseIterable {
        /// Not three base64url parts of JSON, a part that does not decode, or too long.
        case malformed = "token_malformed"
        /// `alg` is `none`, unknown, or one no configured key is for (algorithm confusion).
        case algorithm = "token_algorithm"
        /// No configured key verifies the signature (or the key named by `kid` is unknown).
        case signature = "token_signature"
        /// `exp` is past (beyond the leeway), or missing.
        case expired = "token_expired"
        /// `nbf` is in the future (beyond the leeway).
        case notYetValid = "token_not_yet_valid"
        /// `iss` is not the configured issuer.
        case issuer = "token_issuer"
        /// `aud` does not name the configured audience.
        case audience = "token_audience"
        /// The user claim is missing or not a positive 64-bit integer in digits.
        case userClaim = "token_user_claim"
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
