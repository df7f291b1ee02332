import CounterCore
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// An async client for CounterService's HTTP API: likes, counts, feed pages, health, metrics and
/// the admin routes.
///
/// Two ways to call it. An app calls as its signed-in user: give `userToken`, a provider of the
/// user's token from the app's identity provider, and use the calls without a `user:` argument
/// (`toggle(post:)`, `setLiked(_:post:)`, `feed(posts:)`, …) — the node takes the user from the
/// token. A backend calls with the service's `apiToken` and names the user in each call
/// (`setLiked(_:post:user:)`, …). Never ship the API token in an app: it acts for every user.
///
/// Idempotent calls (`like`, `unlike`, `setLiked`, reads, feed queries, metrics, stats,
/// inspect) are retried on `503`/`429` (after `Retry-After`) and on connection failures, per `retry`.
/// `toggle` and the admin calls that change things are never retried: a toggle sent twice would
/// undo itself. Prefer `setLiked` — it says what the user wants, so repeating it is harmless.
public struct CounterServiceClient: Sendable {
    /// Where the service is and how to talk to it.
    public struct Configuration: Sendable {
        /// The node, e.g. `http://127.0.0.1:8080`.
        public var baseURL: URL
        /// Bearer token for `/v1` (and `/metrics`); `nil` when the node has none (loopback).
        public var apiToken: String?
        /// Bearer token for `/admin`; `nil` for apps, which never need it.
        public var adminToken: String?
        /// Bearer token for `GET /v1/events` (`--events-token`); `nil` uses `adminToken`.
        public var eventsToken: String?
        /// The signed-in user's token, for the calls without a `user:` argument: called with
        /// `false` before each request (return a cached token), and once with `true` after a `401`
        /// (return a fresh one), after which the request is sent once more. A throw fails the
        /// call with `.unauthenticated`.
        public var userToken: TokenProvider?
        /// How long one attempt may take. Defaults to 10 s.
        public var timeout: Duration = .seconds(10)
        /// Retries of idempotent calls.
        public var retry = RetryPolicy()
        /// Sends each post's requests straight to the node that owns its slot, by the cluster's
        /// map (`GET /v1/cluster`, read on first use and again when a node answers `421`),
        /// instead of letting `baseURL`'s node forward them. Defaults to `false`.
        public var slotAware = false

        public init(baseURL: URL, apiToken: String? = nil, adminToken: String? = nil) {
            self.baseURL = baseURL
            self.apiToken = apiToken
            self.adminToken = adminToken
        }

        /// An app's client: calls go out as the user whose token `userToken` provides.
        public init(baseURL: URL, userToken: @escaping TokenProvider) {
            self.baseURL = baseURL
            self.userToken = userToken
        }
    }

    /// Gives the signed-in user's token; `refresh` asks for a new one (the last was refused).
    public typealias TokenProvider = @Sendable (_ refresh: Bool) async throws -> String

    public private(set) var configuration: Configuration
    private let transport: any HTTPTransport
    private let routes = SlotRoutes()

    public init(configuration: Configuration, transport: any HTTPTransport = URLSessionTransport()) {
        self.configuration = configuration
        self.transport = transport
    }

    // MARK: - Likes

    /// The seed's toggle. Not idempotent, so never retried; see `setLiked`.
    public func toggle(post: Int64, user: Int64) async throws(CounterClientError) -> LikeStatus {
        try await call("POST", try likePath(post, user) + "/toggle", idempotent: false, post: post)
    }

    /// Like (idempotent).
    public func like(post: Int64, user: Int64) async throws(CounterClientError) -> LikeStatus {
        try await call("PUT", try likePath(post, user), idempotent: true, post: post)
    }

    /// Unlike (idempotent).
    public func unlike(post: Int64, user: Int64) async throws(CounterClientError) -> LikeStatus {
        try await call("DELETE", try likePath(post, user), idempotent: true, post: post)
    }

    /// Sends the state the user wants: `like` or `unlike`.
    public func setLiked(_ liked: Bool, post: Int64, user: Int64) async throws(CounterClientError) -> LikeStatus {
        liked ? try await like(post: post, user: user) : try await unlike(post: post, user: user)
    }

    /// Whether `user` likes `post`, and its count.
    public func status(post: Int64, user: Int64) async throws(CounterClientError) -> LikeStatus {
        try await call("GET", try likePath(post, user), idempotent: true, post: post)
    }

    /// A post's count.
    public func count(post: Int64) async throws(CounterClientError) -> PostCount {
        try Self.positive(post, "post id")
        return try await call("GET", "/v1/posts/\(post)", idempotent: true, post: post)
    }

    /// A feed page: counts and the user's likes of up to 1,000 posts in one request. Posts that
    /// do not exist are left out. With `recentLikers`, each entry also carries the post's newest
    /// likers ("liked by Ana, Luca and 1,234 others"); with `reactions`, its kinds' counts (the
    /// largest first, at most the deployment's `--reaction-summary-kinds`), their total and the
    /// user's kinds. Read-only, so retried like a read.
    public func feed(posts: [Int64], user: Int64, recentLikers: Bool = false, reactions: Bool = false) async throws(CounterClientError)
        -> [FeedEntry]
    {
        guard !posts.isEmpty, posts.count <= FeedQuery.maximumPosts else {
            throw .invalidArgument("a feed page holds 1 to 1,000 posts, not \(posts.count)")
        }
        for post in posts { try Self.positive(post, "post id") }
        try Self.positive(user, "user id")
        let body = try Self.encode(FeedQuery(postIDs: posts, userID: user, include: Self.include(recentLikers: recentLikers, reactions: reactions)))
        let page: FeedPage = try await call("POST", "/v1/posts/query", body: body, idempotent: true)
        return page.posts
    }

    // MARK: - Likes as the signed-in user (needs `userToken`)

    /// The seed's toggle, as the signed-in user. Not idempotent, so never retried (a `401` is
    /// sent once more with a fresh token: nothing happened).
    public func toggle(post: Int64) async throws(CounterClientError) -> LikeStatus {
        try await call("POST", try ownPath(post) + "/toggle", credential: .user, idempotent: false, post: post)
    }

    /// Like, as the signed-in user (idempotent).
    public func like(post: Int64) async throws(CounterClientError) -> LikeStatus {
        try await call("PUT", try ownPath(post), credential: .user, idempotent: true, post: post)
    }

    /// Unlike, as the signed-in user (idempotent).
    public func unlike(post: Int64) async throws(CounterClientError) -> LikeStatus {
        try await call("DELETE", try ownPath(post), credential: .user, idempotent: true, post: post)
    }

    /// Sends the state the signed-in user wants: `like` or `unlike`.
    public func setLiked(_ liked: Bool, post: Int64) async throws(CounterClientError) -> LikeStatus {
        liked ? try await like(post: post) : try await unlike(post: post)
    }

    /// Whether the signed-in user likes `post`, and its count.
    public func status(post: Int64) async throws(CounterClientError) -> LikeStatus {
        try await call("GET", try ownPath(post), credential: .user, idempotent: true, post: post)
    }

    /// A feed page for the signed-in user: counts and their likes of up to 1,000 posts (and,
    /// with `recentLikers`, each post's newest likers; with `reactions`, its kinds' counts and
    /// the user's kinds).
    public func feed(posts: [Int64], recentLikers: Bool = false, reactions: Bool = false) async throws(CounterClientError) -> [FeedEntry] {
        guard !posts.isEmpty, posts.count <= FeedQuery.maximumPosts else {
            throw .invalidArgument("a feed page holds 1 to 1,000 posts, not \(posts.count)")
        }
        for post in posts { try Self.positive(post, "post id") }
        let body = try Self.encode(OwnFeedQuery(postIDs: posts, include: Self.include(recentLikers: recentLikers, reactions: reactions)))
        let page: FeedPage = try await call("POST", "/v1/posts/query", body: body, credential: .user, idempotent: true)
        return page.posts
    }

    /// A feed query's `include`: `nil` when it asks for nothing more, so the body stays as it was.
    private static func include(recentLikers: Bool, reactions: Bool) -> [String]? {
        let include = (recentLikers ? [FeedQuery.recentLikers] : []) + (reactions ? [FeedQuery.reactions] : [])
        return include.isEmpty ? nil : include
    }

    // MARK: - Lists

    /// One page of `post`'s likers, newest first: `limit` (1–100) after `cursor` (a page's
    /// `nextCursor`; `nil` for the first). As the signed-in user when `userToken` is configured,
    /// else with the API token. Read-only, so retried like a read.
    public func likersPage(of post: Int64, limit: Int = 20, cursor: String? = nil) async throws(CounterClientError) -> LikersPage {
        try Self.positive(post, "post id")
        let path = try Self.listPath("/v1/posts/\(post)/likers", limit: limit, cursor: cursor)
        return try await call("GET", path, credential: configuration.userToken == nil ? nil : .user, idempotent: true, post: post)
    }

    /// Every page of `post`'s likers, newest first, `pageSize` at a time: `for try await page in
    /// client.likers(of: post) { … }`. Each page is asked when the loop wants it.
    public func likers(of post: Int64, pageSize: Int = 20) -> ListPages<LikersPage> {
        ListPages(next: \.nextCursor) { cursor throws(CounterClientError) in try await likersPage(of: post, limit: pageSize, cursor: cursor) }
    }

    /// One page of the posts `user` liked, newest first (with the API token).
    public func likesPage(ofUser user: Int64, limit: Int = 20, cursor: String? = nil) async throws(CounterClientError) -> UserLikesPage {
        try Self.positive(user, "user id")
        return try await call("GET", try Self.listPath("/v1/users/\(user)/likes", limit: limit, cursor: cursor), idempotent: true)
    }

    /// Every page of the posts `user` liked, newest first (with the API token).
    public func likes(ofUser user: Int64, pageSize: Int = 20) -> ListPages<UserLikesPage> {
        ListPages(next: \.nextCursor) { cursor throws(CounterClientError) in try await likesPage(ofUser: user, limit: pageSize, cursor: cursor) }
    }

    /// One page of the posts the signed-in user liked, newest first.
    public func myLikesPage(limit: Int = 20, cursor: String? = nil) async throws(CounterClientError) -> UserLikesPage {
        try await call("GET", try Self.listPath("/v1/me/likes", limit: limit, cursor: cursor), credential: .user, idempotent: true)
    }

    /// Every page of the posts the signed-in user liked, newest first: a "your likes" screen.
    public func myLikes(pageSize: Int = 20) -> ListPages<UserLikesPage> {
        ListPages(next: \.nextCursor) { cursor throws(CounterClientError) in try await myLikesPage(limit: pageSize, cursor: cursor) }
    }

    static func listPath(_ path: String, limit: Int, cursor: String?) throws(CounterClientError) -> String {
        guard (1...100).contains(limit) else { throw .invalidArgument("a page holds 1 to 100 items, not \(limit)") }
        var path = path + "?limit=\(limit)"
        if let cursor {
            // The node's cursors are base64url: nothing to escape. Anything else is not one.
            guard !cursor.isEmpty,
                cursor.utf8.allSatisfy({ $0 == 45 || $0 == 95 || (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) })
            else {
                throw .invalidArgument("\"\(cursor)\" is not a cursor the service gave")
            }
            path += "&cursor=\(cursor)"
        }
        return path
    }

    // MARK: - Change events (needs `eventsToken` or `adminToken`)

    /// The change events committed after event `after` (0: from the oldest kept), oldest first,
    /// at most `limit` (1–1,000); with `wait` (whole seconds, up to 60), an empty answer waits
    /// that long for the next event. Keep the page's `nextAfter` as the next `after` (store it
    /// once the page is handled): every event then comes at least once, in commit order.
    /// - Throws: `.server(status: 410, code: "events_pruned", …)` when retention pruned events
    ///   this cursor had not read yet.
    public func eventsPage(after: Int64 = 0, limit: Int = 100, wait: Duration = .zero) async throws(CounterClientError) -> EventsPage {
        guard after >= 0 else { throw .invalidArgument("after \(after) is not an event id (0 or more)") }
        guard (1...1_000).contains(limit) else { throw .invalidArgument("a page holds 1 to 1,000 events, not \(limit)") }
        let seconds = wait.components.seconds
        guard (0...60).contains(seconds), wait.components.attoseconds == 0 else {
            throw .invalidArgument("wait is whole seconds from 0 to 60, not \(wait)")
        }
        let path = "/v1/events?after=\(after)&limit=\(limit)" + (seconds > 0 ? "&wait=\(seconds)" : "")
        var client = self
        // A long poll may take its whole wait before it answers.
        client.configuration.timeout = max(configuration.timeout, wait + .seconds(10))
        let data = try await client.raw("GET", path, token: configuration.eventsToken ?? configuration.adminToken, idempotent: true)
        do {
            return try WireDecoder.decode(EventsPage.self, from: data)
        } catch {
            throw .invalidResponse("GET \(path): \(error) in \(String(decoding: data.prefix(200), as: UTF8.self))")
        }
    }

    /// The change events from `after` on, as they are committed: each element is a non-empty
    /// page; the sequence long-polls (`wait` at a time) and never ends by itself — stop the loop
    /// to stop. A failed request throws out of the loop; the caller resumes from the last
    /// `nextAfter` it kept.
    public func events(after: Int64 = 0, pageSize: Int = 100, wait: Duration = .seconds(30)) -> EventPages {
        EventPages(after: after) { after throws(CounterClientError) in try await eventsPage(after: after, limit: pageSize, wait: wait) }
    }

    // MARK: - Health and metrics

    /// `true` when the node answers `/healthz`.
    public func isAlive() async -> Bool {
        (try? await raw("GET", "/healthz", token: nil, idempotent: false)) != nil
    }

    /// `true` when the node answers `/readyz` (its Redis and PostgreSQL answer).
    public func isReady() async -> Bool {
        (try? await raw("GET", "/readyz", token: nil, idempotent: false)) != nil
    }

    /// The Prometheus text of `/metrics`.
    public func metrics() async throws(CounterClientError) -> String {
        String(decoding: try await raw("GET", "/metrics", token: configuration.apiToken ?? configuration.adminToken, idempotent: true), as: UTF8.self)
    }

    // MARK: - Admin (needs `adminToken`)

    /// Flushes everything acknowledged so far; with `wait`, returns once PostgreSQL has it.
    public func flush(wait: Bool = true) async throws(CounterClientError) -> FlushResult {
        try await call("POST", "/admin/flush" + (wait ? "" : "?wait=false"), admin: true, idempotent: false)
    }

    /// The cluster's slot map as the node knows it (`GET /v1/cluster`; either token).
    public func clusterMap() async throws(CounterClientError) -> ClusterMapBody {
        try await call("GET", "/v1/cluster", admin: true, idempotent: true)
    }

    /// Marks node `nodeID` as draining (its slots go to the other nodes), or, with
    /// `draining: false`, lets it take slots again.
    public func drainNode(_ nodeID: String, draining: Bool = true) async throws(CounterClientError) -> DrainResult {
        try await call(
            "POST", "/admin/cluster/drain", body: try Self.encode(DrainRequest(nodeID: nodeID, draining: draining)),
            admin: true, idempotent: true)
    }

    /// Per shard and in total: backlog, flushes, group commits, retries, dead letters; the Redis nodes.
    public func statistics() async throws(CounterClientError) -> ServiceStatistics {
        try await call("GET", "/admin/stats", admin: true, idempotent: true)
    }

    /// A post in Redis and PostgreSQL side by side, with `user`'s like, and a verdict.
    public func inspect(post: Int64, user: Int64? = nil) async throws(CounterClientError) -> PostInspection {
        try Self.positive(post, "post id")
        if let user { try Self.positive(user, "user id") }
        return try await call("GET", "/admin/posts/\(post)" + (user.map { "?user=\($0)" } ?? ""), admin: true, idempotent: true)
    }

    /// Recounts `posts` (or a page of all posts after `after`) and, with `repair`, fixes drift.
    public func reconcile(posts: [Int64]? = nil, after: Int64 = 0, limit: Int = 1_000, repair: Bool = false) async throws(CounterClientError)
        -> ReconcileReport
    {
        let request =
            posts.map { ReconcileRequest(postIDs: $0, repair: repair) }
            ?? ReconcileRequest(after: after, limit: limit, repair: repair)
        return try await call("POST", "/admin/reconcile", body: try Self.encode(request), admin: true, idempotent: !repair)
    }

    /// The oldest `count` dead letters (at most 10,000).
    public func deadLetters(count: Int = 100) async throws(CounterClientError) -> [DeadLetter] {
        let list: DeadLetterList = try await call("GET", "/admin/dead-letters?count=\(count)", admin: true, idempotent: true)
        return list.deadLetters
    }

    /// Puts dead letters back into the write path: the given ids, or all of them.
    public func replayDeadLetters(ids: [String]? = nil) async throws(CounterClientError) -> ReplayResult {
        let body = try ids.map { ids throws(CounterClientError) in try Self.encode(DeadLetterSelection(ids: ids)) }
        return try await call("POST", "/admin/dead-letters/replay", body: body, admin: true, idempotent: false)
    }

    /// Deletes dead letters; returns how many went.
    public func dropDeadLetters(ids: [String]) async throws(CounterClientError) -> Int {
        let body = try Self.encode(DeadLetterSelection(ids: ids))
        let answer: DropResult = try await call("POST", "/admin/dead-letters/drop", body: body, admin: true, idempotent: false)
        return answer.dropped
    }

    // MARK: - Sending

    private func ownPath(_ post: Int64) throws(CounterClientError) -> String {
        try Self.positive(post, "post id")
        return "/v1/posts/\(post)/like"
    }

    private func likePath(_ post: Int64, _ user: Int64) throws(CounterClientError) -> String {
        try Self.positive(post, "post id")
        try Self.positive(user, "user id")
        return "/v1/posts/\(post)/likes/\(user)"
    }

    static func positive(_ id: Int64, _ what: String) throws(CounterClientError) {
        guard id > 0 else { throw .invalidArgument("\(what) \(id) is not a positive 64-bit integer") }
    }

    static func encode<Body: Encodable>(_ body: Body) throws(CounterClientError) -> Data {
        do { return Data(try WireEncoder.encode(body)) } catch { throw .invalidArgument("cannot encode the request: \(error)") }
    }

    /// - Parameter post: the post the call is about: a slot-aware client sends it to the post's
    ///   owner; any client follows a `421` (the node did nothing) to the owner it names, once.
    func call<Answer: Decodable>(
        _ method: String, _ path: String, body: Data? = nil, admin: Bool = false,
        credential: Credential? = nil, idempotent: Bool,
        post: Int64? = nil
    ) async throws(CounterClientError) -> Answer {
        let data: Data
        if credential == .user {
            data = try await asUser(method, path, body: body, idempotent: idempotent, post: post)
        } else {
            data = try await raw(
                method, path, body: body, token: admin ? configuration.adminToken : configuration.apiToken,
                idempotent: idempotent, post: post)
        }
        do {
            return try WireDecoder.decode(Answer.self, from: data)
        } catch {
            throw .invalidResponse("\(method) \(path): \(error) in \(String(decoding: data.prefix(200), as: UTF8.self))")
        }
    }

    /// Which token a call carries.
    enum Credential { case user }

    /// Sends with the signed-in user's token; after a `401`, once more with a fresh one.
    private func asUser(_ method: String, _ path: String, body: Data?, idempotent: Bool, post: Int64?) async throws(CounterClientError) -> Data {
        guard let provider = configuration.userToken else {
            throw .invalidArgument("calls as the signed-in user need Configuration.userToken")
        }
        var refresh = false
        while true {
            let token: String
            do {
                token = try await provider(refresh)
            } catch {
                throw .unauthenticated("the token provider failed: \(error)")
            }
            do {
                return try await raw(method, path, body: body, token: token, idempotent: idempotent, post: post)
            } catch let error where error.status == 401 && !refresh {
                // A refused token changed nothing: safe to send again, whatever the call.
                refresh = true
            }
        }
    }

    /// Sends with retries (idempotent calls only) and returns the body of a 2xx answer.
    private func raw(
        _ method: String, _ path: String, body: Data? = nil, token: String?,
        idempotent: Bool, post: Int64? = nil
    ) async throws(CounterClientError) -> Data {
        var base = configuration.baseURL
        if configuration.slotAware, let post {
            if !routes.isKnown { await readRoutes() }
            base = routes.owner(ofPost: post) ?? base
        }
        switch try await send(method, path, base: base, body: body, token: token, idempotent: idempotent) {
        case .answer(let data):
            return data
        case .misdirected(let owner):
            // Nothing was done there: safe to send once more, to the owner named, whatever the call.
            if configuration.slotAware { await readRoutes() }
            guard let ownerURL = URL(string: owner) else {
                throw .server(status: 421, code: "not_owner", message: "the node named no usable owner (\(owner))", retryAfterSeconds: nil)
            }
            switch try await send(method, path, base: ownerURL, body: body, token: token, idempotent: idempotent) {
            case .answer(let data):
                return data
            case .misdirected(let again):
                throw .server(status: 421, code: "not_owner", message: "the post's slot moved again (now at \(again)); retry", retryAfterSeconds: 1)
            }
        }
    }

    /// Reads the cluster's map from `baseURL` for slot-aware routing (kept as it was if that fails).
    private func readRoutes() async {
        if case .answer(let data)? = try? await send(
            "GET", "/v1/cluster", base: configuration.baseURL, body: nil,
            token: configuration.apiToken ?? configuration.adminToken, idempotent: true),
            let map = try? WireDecoder.decode(ClusterMapBody.self, from: data)
        {
            routes.update(map)
        }
    }

    /// What a node answered: a 2xx body, or `421` with the owner it names (`Counter-Owner`).
    private enum Sent {
        case answer(Data)
        case misdirected(owner: String)
    }

    /// Sends to `base` with retries (idempotent calls only).
    private func send(
        _ method: String, _ path: String, base: URL, body: Data?, token: String?,
        idempotent: Bool
    ) async throws(CounterClientError) -> Sent {
        guard let url = URL(string: path, relativeTo: base) else {
            throw .invalidArgument("\(path) does not make a URL with \(base)")
        }
        // The deadline is enforced here (`sendWithDeadline`); URLSession's own timeout is only a
        // backstop, as FoundationNetworking on Linux counts it in whole seconds.
        var request = URLRequest(url: url, timeoutInterval: (Double(configuration.timeout.components.seconds) + 2).rounded())
        request.httpMethod = method
        request.httpBody = body
        if body != nil { request.setValue("application/json", forHTTPHeaderField: "Content-Type") }
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        var attempt = 1
        while true {
            let failure: CounterClientError
            do {
                return try await once(request)
            } catch {
                failure = error
            }
            // A cancelled caller (a view that went away) gets its failure at once, not retries.
            guard !Task.isCancelled,
                let delay = configuration.retry.delay(after: failure, attempt: attempt, idempotent: idempotent)
            else {
                throw failure
            }
            // Cancelled while it waits (the caller went away then): no attempt more.
            guard (try? await Task.sleep(for: delay)) != nil else { throw failure }
            attempt += 1
        }
    }

    private func once(_ request: URLRequest) async throws(CounterClientError) -> Sent {
        let (data, response) = try await sendWithDeadline(request)
        if response.statusCode == 421, let owner = response.value(forHTTPHeaderField: "Counter-Owner") {
            return .misdirected(owner: owner)
        }
        guard (200..<300).contains(response.statusCode) else {
            let retryAfter = response.value(forHTTPHeaderField: "Retry-After").flatMap(Double.init)
            if let error = try? WireDecoder.decode(ErrorBody.self, from: data) {
                throw .server(status: response.statusCode, code: error.error.code, message: error.error.message, retryAfterSeconds: retryAfter)
            }
            throw .server(
                status: response.statusCode, code: "http_\(response.statusCode)",
                message: String(decoding: data.prefix(200), as: UTF8.self), retryAfterSeconds: retryAfter)
        }
        return .answer(data)
    }

    /// The transport's answer, or `.timedOut` once `timeout` has passed. The request is
    /// then cancelled but not waited for: how fast a transport gives up is its own business
    /// (URLSession on Linux took seconds under load), the caller's deadline is not.
    private func sendWithDeadline(_ request: URLRequest) async throws(CounterClientError) -> (Data, HTTPURLResponse) {
        let transport = self.transport
        let timeout = configuration.timeout
        let race = FirstResult<Result<(Data, HTTPURLResponse), CounterClientError>>()
        let outcome = await race.first(
            {
                do throws(CounterClientError) { return .success(try await transport.send(request)) } catch { return .failure(error) }
            },
            {
                try? await Task.sleep(for: timeout)
                return .failure(.timedOut(seconds: timeout.inSeconds))
            })
        return try outcome.get()
    }
}
