/// The routes of the HTTP API, matched from a path. Pure.
enum APIRoute: Equatable {
    case like(post: Int64, user: Int64)
    case toggle(post: Int64, user: Int64)
    case post(Int64)
    case query
    case healthz
    case readyz
    case metrics
    case adminFlush
    case adminStats
    case adminInspect(post: Int64)
    case adminReconcile
    case adminDeadLetters
    case adminDeadLettersReplay
    case adminDeadLettersDrop
    /// The path has a route's shape but an id in it is not a positive 64-bit integer.
    case invalidID(String)
    case notFound

    /// The methods the route answers.
    var allowedMethods: [String] {
        switch self {
        case .like: return ["GET", "PUT", "DELETE"]
        case .toggle, .query, .adminFlush, .adminReconcile, .adminDeadLettersReplay, .adminDeadLettersDrop: return ["POST"]
        case .post, .healthz, .readyz, .metrics, .adminStats, .adminInspect, .adminDeadLetters: return ["GET"]
        case .invalidID, .notFound: return []
        }
    }

    /// The label metrics use for the route.
    var label: String {
        switch self {
        case .like: return "/v1/posts/{post}/likes/{user}"
        case .toggle: return "/v1/posts/{post}/likes/{user}/toggle"
        case .post: return "/v1/posts/{post}"
        case .query: return "/v1/posts/query"
        case .healthz: return "/healthz"
        case .readyz: return "/readyz"
        case .metrics: return "/metrics"
        case .adminFlush: return "/admin/flush"
        case .adminStats: return "/admin/stats"
        case .adminInspect: return "/admin/posts/{post}"
        case .adminReconcile: return "/admin/reconcile"
        case .adminDeadLetters: return "/admin/dead-letters"
        case .adminDeadLettersReplay: return "/admin/dead-letters/replay"
        case .adminDeadLettersDrop: return "/admin/dead-letters/drop"
        case .invalidID: return "invalid"
        case .notFound: return "unknown"
        }
    }

    /// Which token the route needs.
    enum Access { case open, api, admin, any }

    var access: Access {
        switch self {
        case .healthz, .readyz, .notFound: return .open
        case .like, .toggle, .post, .query, .invalidID: return .api
        case .adminFlush, .adminStats, .adminInspect, .adminReconcile, .adminDeadLetters, .adminDeadLettersReplay,
             .adminDeadLettersDrop: return .admin
        case .metrics: return .any
        }
    }

    static func match(_ path: String) -> APIRoute {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        guard path.hasPrefix("/") else { return .notFound }
        let parts = Array(segments)
        switch parts.count {
        case 1:
            switch parts[0] {
            case "healthz": return .healthz
            case "readyz": return .readyz
            case "metrics": return .metrics
            default: return .notFound
            }
        case 2 where parts[0] == "admin":
            switch parts[1] {
            case "flush": return .adminFlush
            case "stats": return .adminStats
            case "reconcile": return .adminReconcile
            case "dead-letters": return .adminDeadLetters
            default: return .notFound
            }
        case 3 where parts[0] == "admin" && parts[1] == "dead-letters":
            switch parts[2] {
            case "replay": return .adminDeadLettersReplay
            case "drop": return .adminDeadLettersDrop
            default: return .notFound
            }
        case 3 where parts[0] == "admin" && parts[1] == "posts":
            guard let post = EntityID.parse(parts[2]) else { return .invalidID("post id \"\(parts[2])\"") }
            return .adminInspect(post: post)
        case 3 where parts[0] == "v1" && parts[1] == "posts":
            if parts[2] == "query" { return .query }
            guard let post = EntityID.parse(parts[2]) else { return .invalidID("post id \"\(parts[2])\"") }
            return .post(post)
        case 5 where parts[0] == "v1" && parts[1] == "posts" && parts[3] == "likes",
             6 where parts[0] == "v1" && parts[1] == "posts" && parts[3] == "likes" && parts[5] == "toggle":
            guard let post = EntityID.parse(parts[2]) else { return .invalidID("post id \"\(parts[2])\"") }
            guard let user = EntityID.parse(parts[4]) else { return .invalidID("user id \"\(parts[4])\"") }
            return parts.count == 5 ? .like(post: post, user: user) : .toggle(post: post, user: user)
        default:
            return .notFound
        }
    }
}

/// Ids are positive 64-bit integers (PostgreSQL `bigint`), written in decimal digits only.
public enum EntityID {
    /// The id `text` names, or `nil` for anything else (`0`, `-1`, `+1`, `abc`, 20 digits, empty).
    public static func parse<Text: StringProtocol>(_ text: Text) -> Int64? {
        guard !text.isEmpty, text.utf8.count <= 19, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
              let value = Int64(text), value > 0 else { return nil }
        return value
    }
}
