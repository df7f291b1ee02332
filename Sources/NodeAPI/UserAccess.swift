import Synchronization
import UserTokens

/// How end users are let in: the tokens of the app's identity provider, the seed's route, and
/// each user's write limit. Off (no user routes) until a secret or a key set is given.
public struct UserAccessConfiguration: Sendable, Equatable {
    /// The HS256 shared secret (at least 32 bytes).
    public var secret: String?
    /// A JWKS file path or `http(s)://` URL with the RS256/ES256 keys.
    public var keySetLocation: String?
    /// How often the key set is read again.
    public var keySetRefresh: Duration = .seconds(300)
    /// What the claims must say.
    public var rules = ClaimRules()
    /// Whether the user routes also take the API token, with the user named in a `Counter-User`
    /// header (a gateway that authenticated the user itself).
    public var apiTokenOnUserRoutes = false
    /// Whether `POST /api/posts/{id}/like` answers, in the seed's shape.
    public var seedRoute = false
    /// Writes per second each user may make on the user routes; 0: no limit.
    public var writesPerSecond = 10
    /// Writes a user may make at once after a pause.
    public var burst = 20
    /// Users whose buckets are kept at most.
    public var trackedUsers = 100_000

    public init() {}

    /// Whether the user routes answer.
    public var isEnabled: Bool { secret != nil || keySetLocation != nil }
}

/// End users at run time: the token verifier (its key set filled by `KeySetSource`), the
/// per-user write limiter, and counts of refused tokens for `/metrics`.
public final class UserAccess: Sendable {
    public let configuration: UserAccessConfiguration
    public let verifier: TokenVerifier
    public let limiter: UserRateLimiter?
    private let refusals: Mutex<[Int]>

    /// - Parameter clock: monotonic nanoseconds for the write limits (tests); `nil`: the real clock.
    /// - Throws: `ConfigurationProblem` for a secret shorter than 32 bytes.
    public init(configuration: UserAccessConfiguration, clock: (@Sendable () -> UInt64)? = nil) throws {
        self.configuration = configuration
        var secret: HMACSecret?
        if let text = configuration.secret {
            guard let parsed = HMACSecret(text) else {
                throw ConfigurationProblem(message: "the user token secret must be at least \(HMACSecret.minimumBytes) bytes")
            }
            secret = parsed
        }
        verifier = TokenVerifier(secret: secret, keySet: configuration.keySetLocation != nil, rules: configuration.rules)
        limiter =
            configuration.writesPerSecond > 0
            ? UserRateLimiter(
                writesPerSecond: Double(configuration.writesPerSecond), burst: configuration.burst,
                trackedUsers: configuration.trackedUsers, clock: clock)
            : nil
        refusals = Mutex([Int](repeating: 0, count: TokenRefusal.Code.allCases.count))
    }

    /// The key set's source, when one is configured.
    public var keySetSource: KeySetSource? { configuration.keySetLocation.map(KeySetSource.init(location:)) }

    func countRefusal(_ code: TokenRefusal.Code) {
        let index = TokenRefusal.Code.allCases.firstIndex(of: code)!
        refusals.withLock { $0[index] += 1 }
    }

    /// Refused tokens so far, by code.
    var refusalCounts: [(code: TokenRefusal.Code, count: Int)] {
        let counts = refusals.withLock { $0 }
        return TokenRefusal.Code.allCases.enumerated().map { ($1, counts[$0]) }
    }

    public struct ConfigurationProblem: Error, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }
}
