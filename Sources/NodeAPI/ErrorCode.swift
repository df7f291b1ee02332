import UserTokens
import WritePath

/// Every error code the node answers, with its HTTP status: the one list the answers are built
/// from (`HTTPResponse.error`), and that `docs/openapi.yaml` is held to — its `Error.code` enum,
/// and for each operation the statuses and the codes its responses name (`OpenAPIErrorCodesTests`,
/// from the codes each route of `APIRoutes` answers). A new refusal is a case here first.
enum ErrorCode: String, CaseIterable, Sendable {
    /// No such route; or the user routes, or the seed's route, are off.
    case notFound = "not_found"
    /// A missing or wrong bearer token.
    case unauthorized
    // An end user's token refused (`TokenRefusal.Code`).
    case tokenMalformed = "token_malformed"
    case tokenAlgorithm = "token_algorithm"
    case tokenSignature = "token_signature"
    case tokenExpired = "token_expired"
    case tokenNotYetValid = "token_not_yet_valid"
    case tokenIssuer = "token_issuer"
    case tokenAudience = "token_audience"
    case tokenUserClaim = "token_user_claim"
    /// An end user's token asked for another user's likes.
    case forbidden
    case invalidID = "invalid_id"
    case invalidJSON = "invalid_json"
    case invalidBody = "invalid_body"
    case invalidArgument = "invalid_argument"
    case invalidCursor = "invalid_cursor"
    case methodNotAllowed = "method_not_allowed"
    case postNotFound = "post_not_found"
    /// A reaction kind the deployment's fixed kinds do not list (or, with likes only, another
    /// kind than `like`).
    case unknownKind = "unknown_kind"
    /// A kind new to a post beyond the distinct kinds a post may hold (`--reaction-kinds-per-post`).
    case tooManyKinds = "too_many_kinds"
    case rateLimited = "rate_limited"
    /// `GET /v1/events` on a node with `--events false`.
    case eventsOff = "events_off"
    /// Events after the consumer's cursor were pruned by retention.
    case eventsPruned = "events_pruned"
    case backlogFull = "backlog_full"
    case overloaded
    case shuttingDown = "shutting_down"
    case slotMoving = "slot_moving"
    case noOwner = "no_owner"
    case notReplicated = "not_replicated"
    /// A forwarded toggle whose connection broke after it was sent: it may have run.
    case outcomeUnknown = "outcome_unknown"
    /// A request forwarded here for a slot this node does not own (`421`).
    case notOwner = "not_owner"
    case unavailable
    case notReady = "not_ready"
    case bodyTooLarge = "body_too_large"
    case headersTooLarge = "headers_too_large"
    /// Framing an intermediary could read differently (the transport's refusal).
    case badRequest = "bad_request"
    case notClustered = "not_clustered"
    case nodeNotFound = "node_not_found"
    /// An answer that could not be encoded: a bug, on no operation's list.
    case `internal`

    var status: Int {
        switch self {
        case .invalidID, .invalidJSON, .invalidBody, .invalidArgument, .invalidCursor, .badRequest, .unknownKind: return 400
        case .unauthorized, .tokenMalformed, .tokenAlgorithm, .tokenSignature, .tokenExpired, .tokenNotYetValid, .tokenIssuer,
            .tokenAudience, .tokenUserClaim:
            return 401
        case .forbidden: return 403
        case .notFound, .postNotFound, .notClustered, .nodeNotFound: return 404
        case .methodNotAllowed: return 405
        case .eventsOff, .tooManyKinds: return 409
        case .eventsPruned: return 410
        case .bodyTooLarge: return 413
        case .notOwner: return 421
        case .rateLimited: return 429
        case .headersTooLarge: return 431
        case .internal: return 500
        case .backlogFull, .overloaded, .shuttingDown, .slotMoving, .noOwner, .notReplicated, .outcomeUnknown, .unavailable, .notReady:
            return 503
        }
    }

    /// The transport's own refusals (`HTTPRefusal`): any request may meet them, whatever its
    /// route, so the document names them where it chooses to rather than on every operation.
    static let transport: Set<ErrorCode> = [.badRequest, .bodyTooLarge, .headersTooLarge, .shuttingDown]

    /// What the write path may refuse an operation with (`HTTPResponse.error(for:)`), but
    /// `post_not_found`, which only the routes on one post answer.
    static let writePath: [ErrorCode] = [
        .invalidArgument, .backlogFull, .overloaded, .shuttingDown, .slotMoving, .noOwner, .notReplicated,
        .unavailable,
    ]

    /// What a reaction's write may be refused with, beside the write path's refusals.
    static let reactionWrite: [ErrorCode] = [.postNotFound, .unknownKind, .tooManyKinds]

    /// What checking a JSON body may refuse (`RequestBody`).
    static let body: [ErrorCode] = [.invalidJSON, .invalidBody, .invalidID]

    /// An end user's token refused, by the verifier's reason.
    init(_ refusal: TokenRefusal.Code) {
        switch refusal {
        case .malformed: self = .tokenMalformed
        case .algorithm: self = .tokenAlgorithm
        case .signature: self = .tokenSignature
        case .expired: self = .tokenExpired
        case .notYetValid: self = .tokenNotYetValid
        case .issuer: self = .tokenIssuer
        case .audience: self = .tokenAudience
        case .userClaim: self = .tokenUserClaim
        }
    }
}
