import CounterCore
import Persistence

/// The routes of the HTTP API, matched from a path. Pure.
enum APIRoute: Equatable {
    case like(post: Int64, user: Int64)
    case toggle(post: Int64, user: Int64)
    /// `/v1/posts/{post}/like`: the caller's own like (the user from their token).
    case userLike(post: Int64)
    /// `/v1/posts/{post}/like/toggle`.
    case userToggle(post: Int64)
    /// `/api/posts/{id}/like`: the seed's route, answered in its shape.
    case seedToggle(post: Int64)
    case post(Int64)
    /// `/v1/posts/{post}/likers`: a page of the post's likers, newest first.
    case likers(post: Int64)
    /// `/v1/users/{user}/likes`: a page of the posts the user liked, newest first.
    case userLikes(user: Int64)
    /// `/v1/me/likes`: the caller's own likes (the user from their token).
    case myLikes
    /// `/v1/users/{user}/likes/pending`: the user's changes this node holds that PostgreSQL may
    /// not have yet (what the node answering a user's likes asks of the others).
    case userPendingLikes(user: Int64)
    case query
    /// `/v1/events`: the change events after a cursor, oldest first (the outbox).
    case events
    case cluster
    case healthz
    case readyz
    case metrics
    /// `/openapi.json`: the API's OpenAPI document.
    case openAPI
    case adminFlush
    case adminStats
    case adminInspect(post: Int64)
    case adminReconcile
    case adminDeadLetters
    case adminDeadLettersReplay
    case adminDeadLettersDrop
    case adminClusterDrain
    /// `/admin/cluster/…`: the operator calls on every live node, answers merged.
    case adminClusterFlush
    case adminClusterStats
    case adminClusterReconcile
    case adminClusterDeadLettersReplay
    /// The path has a route's shape but an id in it is not a positive 64-bit integer.
    case invalidID(String)
    case notFound

    /// The methods the route answers.
    var allowedMethods: [String] {
        switch self {
        case .like, .userLike: return ["GET", "PUT", "DELETE"]
        case .toggle, .userToggle, .seedToggle, .query, .adminFlush, .adminReconcile, .adminDeadLettersReplay, .adminDeadLettersDrop, .adminClusterDrain,
             .adminClusterFlush, .adminClusterReconcile, .adminClusterDeadLettersReplay: return ["POST"]
        case .post, .likers, .userLikes, .myLikes, .userPendingLikes, .events, .cluster, .healthz, .readyz, .metrics, .openAPI, .adminStats, .adminInspect, .adminDeadLetters,
             .adminClusterStats: return ["GET"]
        case .invalidID, .notFound: return []
        }
    }

    /// The label metrics use for the route.
    var label: String {
        switch self {
        case .like: return "/v1/posts/{post}/likes/{user}"
        case .toggle: return "/v1/posts/{post}/likes/{user}/toggle"
        case .userLike: return "/v1/posts/{post}/like"
        case .userToggle: return "/v1/posts/{post}/like/toggle"
        case .seedToggle: return "/api/posts/{id}/like"
        case .post: return "/v1/posts/{post}"
        case .likers: return "/v1/posts/{post}/likers"
        case .userLikes: return "/v1/users/{user}/likes"
        case .myLikes: return "/v1/me/likes"
        case .userPendingLikes: return "/v1/users/{user}/likes/pending"
        case .query: return "/v1/posts/query"
        case .events: return "/v1/events"
        case .cluster: return "/v1/cluster"
        case .healthz: return "/healthz"
        case .readyz: return "/readyz"
        case .metrics: return "/metrics"
        case .openAPI: return "/openapi.json"
        case .adminFlush: return "/admin/flush"
        case .adminStats: return "/admin/stats"
        case .adminInspect: return "/admin/posts/{post}"
        case .adminReconcile: return "/admin/reconcile"
        case .adminDeadLetters: return "/admin/dead-letters"
        case .adminDeadLettersReplay: return "/admin/dead-letters/replay"
        case .adminDeadLettersDrop: return "/admin/dead-letters/drop"
        case .adminClusterDrain: return "/admin/cluster/drain"
        case .adminClusterFlush: return "/admin/cluster/flush"
        case .adminClusterStats: return "/admin/cluster/stats"
        case .adminClusterReconcile: return "/admin/cluster/reconcile"
        case .adminClusterDeadLettersReplay: return "/admin/cluster/dead-letters/replay"
        case .invalidID: return "invalid"
        case .notFound: return "unknown"
        }
    }

    /// Which token the route needs: none, the API token (or the admin token), the admin token,
    /// either, an end user's token, the API token or a user's, or the events token (or the admin
    /// token).
    enum Access { case open, api, admin, any, user, apiOrUser, events }

    var access: Access {
        switch self {
        case .healthz, .readyz, .openAPI, .notFound: return .open
        case .like, .toggle, .post: return .api
        // A bad id is named to anyone who may use one of the routes it could be meant for.
        case .query, .invalidID, .likers, .userLikes, .userPendingLikes: return .apiOrUser
        case .userLike, .userToggle, .seedToggle, .myLikes: return .user
        case .adminFlush, .adminStats, .adminInspect, .adminReconcile, .adminDeadLetters, .adminDeadLettersReplay,
             .adminDeadLettersDrop, .adminClusterDrain, .adminClusterFlush, .adminClusterStats, .adminClusterReconcile,
             .adminClusterDeadLettersReplay: return .admin
        case .metrics, .cluster: return .any
        case .events: return .events
        }
    }

    /// One of each route, for holding the OpenAPI document to the router (by test).
    static let every: [APIRoute] = [
        .like(post: 1, user: 1), .toggle(post: 1, user: 1), .userLike(post: 1), .userToggle(post: 1), .seedToggle(post: 1),
        .post(1), .likers(post: 1), .userLikes(user: 1), .myLikes, .userPendingLikes(user: 1), .query, .events, .cluster, .healthz, .readyz, .metrics, .openAPI, .adminFlush, .adminStats, .adminInspect(post: 1),
        .adminReconcile, .adminDeadLetters, .adminDeadLettersReplay, .adminDeadLettersDrop, .adminClusterDrain,
        .adminClusterFlush, .adminClusterStats, .adminClusterReconcile, .adminClusterDeadLettersReplay,
    ]

    /// The route `path` names. Works on the path's bytes: it runs once per request.
    static func match(_ path: String) -> APIRoute {
        let bytes = path.utf8
        guard bytes.first == UInt8(ascii: "/") else { return .notFound }
        let parts = bytes.dropFirst().split(separator: UInt8(ascii: "/"), maxSplits: 6, omittingEmptySubsequences: false)
        func part(_ index: Int, is text: StaticString) -> Bool {
            let expected = UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)
            return parts[index].elementsEqual(expected)
        }
        func id(_ index: Int) -> Int64? { EntityID.parse(bytes: parts[index]) }
        func invalid(_ index: Int, _ what: String) -> APIRoute {
            .invalidID("\(what) id \"\(String(decoding: parts[index], as: UTF8.self))\"")
        }
        switch parts.count {
        case 1:
            if part(0, is: "healthz") { return .healthz }
            if part(0, is: "readyz") { return .readyz }
            if part(0, is: "metrics") { return .metrics }
            if part(0, is: "openapi.json") { return .openAPI }
            return .notFound
        case 2 where part(0, is: "v1"):
            if part(1, is: "cluster") { return .cluster }
            return part(1, is: "events") ? .events : .notFound
        case 3 where part(0, is: "v1") && part(1, is: "me"):
            return part(2, is: "likes") ? .myLikes : .notFound
        case 2 where part(0, is: "admin"):
            if part(1, is: "flush") { return .adminFlush }
            if part(1, is: "stats") { return .adminStats }
            if part(1, is: "reconcile") { return .adminReconcile }
            if part(1, is: "dead-letters") { return .adminDeadLetters }
            return .notFound
        case 3 where part(0, is: "admin") && part(1, is: "dead-letters"):
            if part(2, is: "replay") { return .adminDeadLettersReplay }
            if part(2, is: "drop") { return .adminDeadLettersDrop }
            return .notFound
        case 3 where part(0, is: "admin") && part(1, is: "cluster"):
            if part(2, is: "drain") { return .adminClusterDrain }
            if part(2, is: "flush") { return .adminClusterFlush }
            if part(2, is: "stats") { return .adminClusterStats }
            if part(2, is: "reconcile") { return .adminClusterReconcile }
            return .notFound
        case 4 where part(0, is: "admin") && part(1, is: "cluster") && part(2, is: "dead-letters"):
            return part(3, is: "replay") ? .adminClusterDeadLettersReplay : .notFound
        case 3 where part(0, is: "admin") && part(1, is: "posts"):
            guard let post = id(2) else { return invalid(2, "post") }
            return .adminInspect(post: post)
        case 3 where part(0, is: "v1") && part(1, is: "posts"):
            if part(2, is: "query") { return .query }
            guard let post = id(2) else { return invalid(2, "post") }
            return .post(post)
        case 4 where part(0, is: "v1") && part(1, is: "posts") && part(3, is: "like"),
             5 where part(0, is: "v1") && part(1, is: "posts") && part(3, is: "like") && part(4, is: "toggle"):
            guard let post = id(2) else { return invalid(2, "post") }
            return parts.count == 4 ? .userLike(post: post) : .userToggle(post: post)
        case 4 where part(0, is: "v1") && part(1, is: "posts") && part(3, is: "likers"):
            guard let post = id(2) else { return invalid(2, "post") }
            return .likers(post: post)
        case 4 where part(0, is: "v1") && part(1, is: "users") && part(3, is: "likes"):
            guard let user = id(2) else { return invalid(2, "user") }
            return .userLikes(user: user)
        case 4 where part(0, is: "api") && part(1, is: "posts") && part(3, is: "like"):
            guard let post = id(2) else { return invalid(2, "post") }
            return .seedToggle(post: post)
        case 5 where part(0, is: "v1") && part(1, is: "users") && part(3, is: "likes") && part(4, is: "pending"):
            guard let user = id(2) else { return invalid(2, "user") }
            return .userPendingLikes(user: user)
        case 5 where part(0, is: "v1") && part(1, is: "posts") && part(3, is: "likes"),
             6 where part(0, is: "v1") && part(1, is: "posts") && part(3, is: "likes") && part(5, is: "toggle"):
            guard let post = id(2) else { return invalid(2, "post") }
            guard let user = id(4) else { return invalid(4, "user") }
            return parts.count == 5 ? .like(post: post, user: user) : .toggle(post: post, user: user)
        default:
            return .notFound
        }
    }
}
