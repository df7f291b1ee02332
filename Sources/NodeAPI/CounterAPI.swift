import CounterCore
import CounterWire
import Foundation
import NodeCluster
import NodeHTTP
import Persistence
import ShardRouter
import UserTokens
import WritePath

/// The HTTP API (README, "HTTP API") on top of a `CounterService`: routes, auth, JSON, error mapping,
/// metrics. Requests that need no I/O (health, routing and auth errors) are answered on the HTTP
/// thread; likes go straight to the shards; the rest run on tasks.
public final class CounterAPI: HTTPHandler, Service {
    let service: CounterService
    let tokens: AccessTokens
    /// End users' tokens and write limits; `nil`: no user routes.
    let users: UserAccess?
    let authentication: Authentication
    let metrics = HTTPMetrics()
    let inspector: PostInspector
    let reconciler: Reconciler
    let deadLetters: DeadLetters
    /// The lists of likers and of a user's likes.
    let lists: LikeListAnswers
    private let readiness: ReadinessProbe
    /// The node's cluster membership, when it is one node of several.
    let member: ClusterMember?
    /// Sends requests for slots other nodes own on to them.
    let forwarder: Forwarder?
    /// The connections of the cluster-wide operator calls to the other nodes, a few per node:
    /// `quick` ones give up on a node after 15 s (one stopped, or cut off); `patient` ones wait
    /// as long as a flush may take (its caller gives up sooner, at its own timeout).
    let adminPeers: (quick: PeerClient, patient: PeerClient)?
    /// The requests that wait for more than the write path's answer, run as children of `run`.
    private let tasks: RequestTasks
    /// The change events (`GET /v1/events`) and their long polls.
    let events: EventFeedAnswers
    /// The events' pruning, for `/metrics`.
    private let retention: EventRetention?
    private let postgres: PostgresPool
    /// Where failures the answers do not detail are logged.
    private let failures: FailureLog

    /// - Parameters:
    ///   - redis: the client the admin routes and `/readyz` use (the caller closes it); give it
    ///     the service's topology (`RedisClient(topology: service.redisTopology)`).
    ///   - member: the node's cluster membership: requests for slots other nodes own are then
    ///     forwarded to them, and `/v1/cluster` answers. `nil` for a write path that is the only
    ///     writer.
    ///   - readyMaxLag: `/readyz` fails while the oldest change waiting for PostgreSQL is older;
    ///     `nil` never.
    ///   - users: end users' tokens, the seed's route and per-user write limits; `nil` (or one
    ///     without a secret or key set): the user routes answer 404.
    ///   - log: hears of requests that failed for a reason the answer does not give (the
    ///     client gets a stable message; the detail goes here, at most once a second).
    ///   - retention: the pruning of the change events, for `/metrics`; `nil` when events are
    ///     kept (or off).
    ///   - eventsPostgres: the pool `GET /v1/events` reads with (its long polls too), so a
    ///     consumer does not wait behind the flushes for a connection; `nil`: `postgres`.
    /// - Throws: `HTTPServerError` when a node of a cluster cannot make its connections to the
    ///   other nodes (their epoll loops); nothing is left running then.
    public init(service: CounterService, tokens: AccessTokens, postgres: PostgresPool, redis: RedisClient, member: ClusterMember? = nil,
                readyMaxLag: Duration? = nil, users: UserAccess? = nil, retention: EventRetention? = nil,
                eventsPostgres: PostgresPool? = nil, log: NodeLog = .silent) throws {
        self.retention = retention
        self.postgres = postgres
        self.failures = FailureLog(log: log)
        self.service = service
        self.tokens = tokens
        self.users = users
        self.authentication = Authentication(tokens: tokens, users: users)
        self.member = member
        self.forwarder = try member.map { try Forwarder(member: $0, ownerWait: service.configuration.slotMoveWait) }
        self.adminPeers = member == nil ? nil : (quick: try PeerClient(maximumConnectionsPerPeer: 8, timeout: .seconds(15)),
                                                 patient: try PeerClient(maximumConnectionsPerPeer: 8, timeout: .seconds(3_600)))
        let layout = RedisKeyLayout(prefix: service.configuration.keyPrefix)
        self.inspector = PostInspector(service: service, postgres: postgres, redis: redis, layout: layout)
        self.readiness = ReadinessProbe(postgres: postgres, redis: redis, member: member, service: service, maxLag: readyMaxLag)
        self.reconciler = Reconciler(postgres: postgres, redis: redis, layout: layout, service: service)
        self.deadLetters = DeadLetters(service: service, redis: redis, layout: layout)
        self.lists = LikeListAnswers(service: service, postgres: postgres)
        let tasks = RequestTasks()
        self.tasks = tasks
        let eventsPool = eventsPostgres ?? postgres
        self.events = EventFeedAnswers(postgres: eventsPool, watch: EventWatch(postgres: eventsPool, wake: service.flushCommits,
                                                                               start: { tasks.start($0) }))
    }

    /// As a `Service`: runs the requests that wait (everything but the hot like routes) until
    /// asked to stop, then waits for those under way. It starts before the write path and stops
    /// after it, so nothing such a request waits for is left unanswered.
    public func run(_ lifecycle: ServiceLifecycle) async throws {
        await tasks.run(lifecycle)
    }

    /// Runs `work` as one of the API's request tasks and answers with what it returns (503
    /// once the API has stopped).
    private func later(_ respond: @escaping @Sendable (HTTPResponse) -> Void, _ work: @escaping @Sendable () async -> HTTPResponse) {
        let started = tasks.start { respond(await work()) }
        if !started { respond(response(for: .shuttingDown)) }
    }

    /// The readiness checks on a schedule of their own, a service to start once the write path
    /// runs: `/metrics` reports their last verdict.
    public var readinessSchedule: ReadinessSchedule { ReadinessSchedule(probe: readiness) }

    /// From now on `/readyz` answers 503 (`shutting down`), so load balancers stop sending here
    /// while the node hands its slots off and stops. Called on the first SIGTERM/SIGINT.
    public func markShuttingDown() {
        readiness.markShuttingDown()
        // Long polls of the events answer now, so they do not hold the node's exit.
        let watch = events.watch
        _ = tasks.start { await watch.releaseAll() }
    }

    /// Routes once: refusals and health are answered at once; like/unlike/toggle/read go straight
    /// into the shard's queue (the answer is built in the shard's completion, no task per
    /// request); everything else runs on a task.
    public func dispatch(_ request: HTTPRequest) -> HTTPDisposition {
        let started = ContinuousClock.now
        let route = APIRoute.match(request.path)
        let caller: Caller
        switch admit(route, request) {
        case .answer(let response):
            record(route, response, since: started)
            return .respond(response)
        case .proceed(let admitted):
            caller = admitted
        }
        if let (operation, post, user) = Self.likeOperation(route, method: request.method, caller: caller) {
            if operation != .read, case .user = caller, let refusal = limit(user, post: post) {
                record(route, refusal, since: started)
                return .respond(refusal)
            }
            let answer: @Sendable (LikeState) -> HTTPResponse = route == .seedToggle(post: post) ? Self.seedResponse : Self.likeResponse
            return .later { respond in
                self.service.submit(operation, post: post, user: user) { result in
                    let response: HTTPResponse
                    switch result {
                    case .success(let state): response = answer(state)
                    case .failure(let error as CounterError) where error.code == .notOwner && self.forwarder != nil:
                        self.later(respond) {
                            let response = await self.elsewhere(request, post: post, mayRepeat: operation != .toggle) { waiting in
                                await self.answeredHere {
                                    answer(try await self.service.perform(operation, post: post, user: user, waitingForSlot: waiting))
                                }
                            }
                            self.record(route, response, since: started)
                            return response
                        }
                        return
                    case .failure(let error as CounterError): response = Self.response(for: error)
                    case .failure(let error): response = self.unavailable(route, error)
                    }
                    self.record(route, response, since: started)
                    respond(response)
                }
            }
        }
        return .later { respond in
            self.later(respond) {
                let response = await self.answer(route, request, caller: caller)
                self.record(route, response, since: started)
                return response
            }
        }
    }

    /// `/healthz` and a ready `/readyz`, encoded once (probes and the bench's ceiling hit them).
    static let healthy = (try? WireEncoder.encode(HealthStatus(status: "ok"))) ?? []
    static let ready = (try? WireEncoder.encode(HealthStatus(status: "ready"))) ?? []

    /// The headers of the API beyond `Authorization`: who forwarded a request here, and the
    /// user a trusted backend acts for.
    public var requestHeaders: [String] { ["Counter-Forwarded-By", "Counter-User"] }

    /// The transport's own refusals, in the API's error format.
    public func response(for refusal: HTTPRefusal) -> HTTPResponse {
        switch refusal {
        case .shuttingDown:
            return .error(.shuttingDown, message: "the node is shutting down", retryAfterSeconds: 1)
        case .bodyTooLarge(let limit):
            return .error(.bodyTooLarge, message: "the request body exceeds \(limit) bytes")
        case .headersTooLarge(let limit):
            return .error(.headersTooLarge, message: "the request line and headers exceed \(limit) bytes")
        case .malformed(let why):
            return .error(.badRequest, message: why)
        }
    }

    /// The operation a like route asks for — toggle, or like/unlike/read by method — its post,
    /// and its user: from the path, or, on the user routes, the caller's.
    static func likeOperation(_ route: APIRoute, method: String, caller: Caller) -> (LikeOperation, Int64, Int64)? {
        let byMethod: LikeOperation = method == "PUT" ? .like : method == "DELETE" ? .unlike : .read
        switch (route, caller) {
        case (.toggle(let post, let user), _): return (.toggle, post, user)
        case (.like(let post, let user), _): return (byMethod, post, user)
        case (.userToggle(let post), .user(let user)), (.seedToggle(let post), .user(let user)): return (.toggle, post, user)
        case (.userLike(let post), .user(let user)): return (byMethod, post, user)
        default: return nil
        }
    }

    /// The `429` for a user's write over their limit, or `nil` to let it go ahead. Counted where
    /// the post's slot is served: a request this node forwards is counted by the node it goes
    /// to, so each write takes one token, wherever it came in.
    private func limit(_ user: Int64, post: Int64) -> HTTPResponse? {
        guard let limiter = users?.limiter else { return nil }
        if forwarder != nil && service.ownership.state(of: HashSlot(post: post).rawValue) == .notOwned { return nil }
        guard let wait = limiter.admit(user) else { return nil }
        return .error(.rateLimited,
                      message: "user \(user) may write \(Int(limiter.writesPerSecond)) times a second (\(limiter.burst) at once); try again in \(wait) s",
                      retryAfterSeconds: wait)
    }

    private func record(_ route: APIRoute, _ response: HTTPResponse, since started: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - started
        metrics.record(route: route.label, status: response.status,
                       seconds: elapsed.inSeconds)
    }

    /// What to do with a request before any waiting: answer it at once (health, unknown routes,
    /// refused tokens, bad ids, wrong methods), or go ahead for the caller its token names.
    private enum Admission {
        case answer(HTTPResponse)
        case proceed(Caller)
    }

    private func admit(_ route: APIRoute, _ request: HTTPRequest) -> Admission {
        if route == .notFound {
            return .answer(.error(.notFound, message: "no route \(request.method) \(request.path)"))
        }
        let caller: Caller
        switch authentication.caller(for: route, request) {
        case .refused(let response): return .answer(response)
        case .caller(let admitted): caller = admitted
        }
        if case .invalidID(let what) = route {
            return .answer(.error(.invalidID, message: "\(what) is not a positive 64-bit integer"))
        }
        guard route.allowedMethods.contains(request.method) else {
            return .answer(.error(.methodNotAllowed,
                                  message: "\(request.method) is not allowed on \(route.label); use \(route.allowedMethods.joined(separator: ", "))",
                                  headers: ["Allow": route.allowedMethods.joined(separator: ", ")]))
        }
        if route == .healthz {
            return .answer(HTTPResponse(status: 200, body: Self.healthy))
        }
        if route == .openAPI {
            return .answer(HTTPResponse(status: 200, body: OpenAPIDocument.json))
        }
        return .proceed(caller)
    }

    func answer(_ route: APIRoute, _ request: HTTPRequest, caller: Caller) async -> HTTPResponse {
        do {
            switch route {
            case .post(let post):
                do {
                    let state = try await service.perform(.count, post: post, user: 0)
                    return HTTPResponse(status: 200, body: HotAnswers.postCount(postID: state.postID, likesCount: state.likesCount))
                } catch let error as CounterError where error.code == .notOwner && forwarder != nil {
                    return await elsewhere(request, post: post, mayRepeat: true) { waiting in
                        await self.answeredHere {
                            let state = try await self.service.perform(.count, post: post, user: 0, waitingForSlot: waiting)
                            return HTTPResponse(status: 200, body: HotAnswers.postCount(postID: state.postID, likesCount: state.likesCount))
                        }
                    }
                }
            case .likers(let post):
                let arguments = try LikeListAnswers.Arguments(request.query)
                do {
                    return .json(try await lists.likers(of: post, arguments, waitingForSlot: false))
                } catch let error as CounterError where error.code == .notOwner && forwarder != nil {
                    return await elsewhere(request, post: post, mayRepeat: true) { waiting in
                        await self.answeredHere { .json(try await self.lists.likers(of: post, arguments, waitingForSlot: waiting)) }
                    }
                }
            case .userLikes(let user):
                if case .user(let caller) = caller, caller != user {
                    return .error(.forbidden, message: "a user's token lists only that user's own likes (GET /v1/me/likes)")
                }
                return try await userLikes(user, request)
            case .myLikes:
                guard case .user(let user) = caller else {
                    return .error(.unauthorized, message: "GET /v1/me/likes needs an end user's token")
                }
                return try await userLikes(user, request)
            case .userPendingLikes(let user):
                if case .user(let caller) = caller, caller != user {
                    return .error(.forbidden, message: "a user's token reads only that user's own changes")
                }
                let pending = try await service.pendingLikes(ofUser: user)
                return .json(PendingLikesBody(userID: user, pending: pending.changes.map {
                    PendingLikesBody.Change(postID: $0.postID, liked: $0.liked, atMilliseconds: $0.acknowledgedAt)
                }, slots: pending.servedSlots.ranges.map { [$0.lowerBound, $0.upperBound] }))
            case .query:
                return try await feed(request, caller: caller)
            case .events:
                let arguments = try EventFeedAnswers.Arguments(request.query)
                guard service.configuration.events else {
                    return .error(.eventsOff, message: "this node runs with --events false: its flushes write no change events; run every node with --events true")
                }
                return try await events.page(arguments)
            case .cluster:
                guard let member else {
                    return .error(.notClustered, message: "this node runs as the only writer; it has no slot map")
                }
                return .json(ClusterAnswers.body(member.map, answeredBy: member.configuration.nodeID))
            case .readyz:
                return await readiness.check()
            case .metrics:
                return await metricsResponse()
            case .adminFlush:
                let wait = try Self.waitArgument(request)
                if wait {
                    try await service.flush()
                } else {
                    await service.requestFlush()
                }
                let pending = await service.stats().reduce(0) { $0 + $1.pendingChanges }
                return .json(FlushResult(flushed: wait, pendingChanges: pending))
            case .adminStats:
                return .json(StatisticsAnswer.make(await service.stats(), redis: service.redisTopology))
            case .adminInspect(let post):
                let user: Int64?
                if let text = request.query["user"] {
                    guard let parsed = EntityID.parse(text) else {
                        return .error(.invalidID, message: "user id \"\(text)\" is not a positive 64-bit integer")
                    }
                    user = parsed
                } else {
                    user = nil
                }
                return .json(try await inspector.inspect(post: post, user: user))
            case .adminReconcile:
                return try await AdminAnswers.reconcile(request.body, reconciler)
            case .adminDeadLetters:
                var count = 100
                if let text = request.query["count"] {
                    // Digits only, on what the client sent (nothing is percent-decoded).
                    guard let parsed = EntityID.parse(text), parsed <= 10_000 else {
                        return .error(.invalidArgument, message: "count \"\(text)\" is not a whole number from 1 to 10,000")
                    }
                    count = Int(parsed)
                }
                return AdminAnswers.letters(try await deadLetters.list(count: count))
            case .adminDeadLettersReplay:
                return try await AdminAnswers.replay(request.body, deadLetters)
            case .adminDeadLettersDrop:
                return try await AdminAnswers.drop(request.body, deadLetters)
            case .adminClusterFlush:
                return .json(await clusterAdmin.flush(wait: try Self.waitArgument(request), authorization: request.authorization))
            case .adminClusterStats:
                return .json(await clusterAdmin.statistics(authorization: request.authorization))
            case .adminClusterReconcile:
                return .json(try await clusterAdmin.reconcile(try AdminAnswers.reconcileRequest(request.body), authorization: request.authorization))
            case .adminClusterDeadLettersReplay:
                return .json(try await clusterAdmin.replay(ids: try AdminAnswers.replayIDs(request.body), authorization: request.authorization))
            case .adminClusterDrain:
                guard let member else {
                    return .error(.notClustered, message: "this node runs as the only writer; it has no cluster to drain")
                }
                let drain = try RequestBody.decode(DrainRequest.self, request.body)
                let draining = drain.draining ?? true
                guard try await member.setDraining(nodeID: drain.nodeID, draining) else {
                    return .error(.nodeNotFound, message: "no node \"\(drain.nodeID)\" is registered in this cluster")
                }
                return .json(DrainResult(nodeID: drain.nodeID, draining: draining))
            case .toggle, .like, .userToggle, .userLike, .seedToggle, .healthz, .openAPI, .invalidID, .notFound:
                // Answered in `dispatch`, never here.
                return .error(.internal, message: "route \(route.label) is answered elsewhere")
            }
        } catch let error as CounterError {
            return Self.response(for: error)
        } catch let error as RequestError {
            return .error(error.code, message: error.message)
        } catch {
            return unavailable(route, error)
        }
    }

    static func likeResponse(_ state: LikeState) -> HTTPResponse {
        HTTPResponse(status: 200, body: HotAnswers.likeStatus(state))
    }

    /// The seed's route answers `{"is_liked":…,"likes_count":…}`, as its Laravel endpoint did.
    static func seedResponse(_ state: LikeState) -> HTTPResponse {
        HTTPResponse(status: 200, body: HotAnswers.seedStatus(state))
    }

    static func response(for error: CounterError) -> HTTPResponse {
        .error(for: error)
    }

    /// `perform`'s answer, its errors as the API phrases them; `nil` when the slot turns out not
    /// to be served here (`notOwner`).
    private func answeredHere(_ perform: () async throws -> HTTPResponse) async -> HTTPResponse? {
        do {
            return try await perform()
        } catch let error as CounterError where error.code == .notOwner {
            return nil
        } catch let error as CounterError {
            return Self.response(for: error)
        } catch {
            return unavailable(nil, error)
        }
    }

    /// The answer to a request that failed for a reason of the node's own (a server error that
    /// is not a `CounterError`): a stable message for the client, the detail for the log.
    private func unavailable(_ route: APIRoute?, _ error: Error) -> HTTPResponse {
        failures.note(route: route?.label ?? "forwarded", error: error)
        return .error(.unavailable, message: "the node could not complete the request; retry (the node's log says why)",
                      retryAfterSeconds: 1)
    }

    /// The answer for a request on `post`, whose slot this node does not serve: forwarded to
    /// the owner; or, when the map (read again) says the slot is this node's — it may be on its
    /// way here: the next round adopts it — run here by `locally`, which waits for the slot
    /// (`locally(true)`) and answers `nil` if it is not served here after all; else, for a
    /// request that was itself forwarded here, `421` with the owner's URL.
    private func elsewhere(_ request: HTTPRequest, post: Int64, mayRepeat: Bool,
                           locally: @escaping @Sendable (_ waitingForSlot: Bool) async -> HTTPResponse?) async -> HTTPResponse {
        guard let forwarder, let member else { return Self.response(for: CounterError.notOwner(HashSlot(post: post).rawValue)) }
        let slot = HashSlot(post: post).rawValue
        let me = member.configuration.nodeID
        if member.map.owner(of: slot)?.id == me || request.forwardedBy != nil {
            // This node's map says the slot is its own, or the sender's does.
            try? await member.refreshMapUnlessFresh()
            if member.map.owner(of: slot)?.id == me, let response = await locally(true) { return response }
        }
        if request.forwardedBy != nil { return forwarder.misdirectedResponse(slot: slot) }
        return await forwarder.forward(request, slot: slot, mayRepeat: mayRepeat) { await locally(false) }
    }

    /// A page of `user`'s likes: the changes waiting for PostgreSQL are every shard's of this
    /// node and, in a cluster, every other live node's (`ClusterPendingLikes`).
    private func userLikes(_ user: Int64, _ request: HTTPRequest) async throws -> HTTPResponse {
        let arguments = try LikeListAnswers.Arguments(request.query)
        let pending: [PendingLike]
        if let member, let forwarder {
            pending = try await ClusterPendingLikes(service: service, member: member, forwarder: forwarder,
                                                    ownerWait: service.configuration.slotMoveWait)
                .all(of: user, credentialsOf: request)
        } else {
            pending = try await service.pendingLikes(ofUser: user).changes
        }
        return .json(try await lists.likes(of: user, pending: pending, arguments))
    }

    /// `POST /v1/posts/query`: `{"post_ids":[…],"user_id":7}` → counts and the user's likes,
    /// one batch per shard; without `user_id` (API token), a logged-out viewer's page: counts,
    /// `is_liked` false. Posts that do not exist are left out of the answer. Posts whose
    /// slots other nodes own are asked of those nodes (one query each) and merged in order.
    private func feed(_ request: HTTPRequest, caller: Caller) async throws -> HTTPResponse {
        let posts: [Int64]
        let viewer: Int64?
        let include: [String]?
        if case .user(let user) = caller {
            let query = try RequestBody.ownFeedQuery(request.body, user: user)
            (posts, viewer, include) = (query.postIDs, user, query.include)
        } else {
            let query = try RequestBody.feedQuery(request.body)
            (posts, viewer, include) = (query.postIDs, query.userID, query.include)
        }
        let withLikers = include?.contains(FeedQuery.recentLikers) == true
        let results = await service.performMany(posts.map { post in viewer.map { (LikeOperation.read, post, $0) } ?? (.count, post, 0) })
        var states: [LikeState?] = Array(repeating: nil, count: results.count)
        var elsewhere: [Int] = []
        for (index, result) in results.enumerated() {
            switch result {
            case .success(let state): states[index] = state
            case .failure(let error as CounterError) where error.code == .unknownPost: continue
            case .failure(let error as CounterError) where error.code == .notOwner && forwarder != nil: elsewhere.append(index)
            case .failure(let error): throw error
            }
        }
        // The previews of the posts answered here, exact as their likers pages.
        var recent: [Int64: [Liker]] = withLikers ? try await lists.recentLikers(of: states.compactMap { $0?.postID }) : [:]
        if !elsewhere.isEmpty {
            if request.forwardedBy != nil, let forwarder {
                return forwarder.misdirectedResponse(slot: HashSlot(post: posts[elsewhere[0]]).rawValue)
            }
            let answers = try await FeedSplit.ask(elsewhere.map { posts[$0] }, user: viewer, include: include, like: request, api: self)
            for index in elsewhere { states[index] = answers.states[posts[index]] }
            recent.merge(answers.recentLikers) { mine, _ in mine }
        }
        guard withLikers else { return HTTPResponse(status: 200, body: HotAnswers.feedPage(states.compactMap { $0 })) }
        return .json(FeedPage(posts: states.compactMap { $0 }.map {
            FeedEntry(postID: $0.postID, likesCount: $0.likesCount, isLiked: $0.isLiked, recentLikers: recent[$0.postID] ?? [])
        }))
    }

    /// Forwards a feed query for `posts` (each group to its owner) and returns their states;
    /// `user` `nil` asks for a logged-out viewer's page.
    func forwardFeed(_ posts: [Int64], user: Int64?, include: [String]?, like request: HTTPRequest) async throws -> FeedSplit.Answers {
        guard let forwarder else { return FeedSplit.Answers() }
        let body = try WireEncoder.encode(OwnFeedQuery(postIDs: posts, userID: user, include: include))
        let forwarded = HTTPRequest(method: "POST", path: "/v1/posts/query", authorization: request.authorization, body: body)
        let response = await forwarder.forward(forwarded, slot: HashSlot(post: posts[0]).rawValue, mayRepeat: true)
        guard response.status == 200 else {
            throw CounterError(code: .unavailable, message: "the owner of posts \(posts.prefix(3).map(String.init).joined(separator: ",")) answered \(response.status): \(String(decoding: response.body, as: UTF8.self))",
                               retryAfterSeconds: 1)
        }
        let page = try WireDecoder.decode(FeedPage.self, from: response.body)
        var answers = FeedSplit.Answers()
        for item in page.posts {
            answers.states[item.postID] = LikeState(postID: item.postID, userID: user ?? 0, isLiked: item.isLiked, likesCount: item.likesCount)
            if let likers = item.recentLikers { answers.recentLikers[item.postID] = likers }
        }
        return answers
    }

    private func metricsResponse() async -> HTTPResponse {
        var text = ""
        metrics.render(into: &text)
        MetricsText.renderShards(await service.stats(), into: &text)
        MetricsText.renderLag(service.writeBehindLag.snapshot(), into: &text)
        MetricsText.renderRedis(service.redisTopology, into: &text)
        ProcessMetrics.render(into: &text)
        let ready = await readiness.isReady()
        MetricsText.single("counter_ready", "gauge",
                           "1 when the last readiness check passed (the one /readyz answers with: PostgreSQL and Redis answer, the backlog is young enough, the node serves its slots; run on /readyz and every \(Int(ReadinessSchedule.interval.inSeconds)) s), else 0.",
                           ready ? "1" : "0", into: &text)
        MetricsText.single("counter_flush_max_age_seconds", "gauge", "The configured --flush-max-age-ms: about the longest a change should wait for PostgreSQL.",
                           "\(service.configuration.flushMaxAge.inSeconds)", into: &text)
        if let users, users.configuration.isEnabled { UserMetrics.render(users, into: &text) }
        await EventMetrics.render(enabled: service.configuration.events, retention: retention, postgres: postgres, into: &text)
        if let member, let forwarder {
            ClusterMetrics.render(member: member, ownership: service.ownership, forwarder: forwarder, into: &text)
        }
        return HTTPResponse(status: 200, contentType: "text/plain; version=0.0.4", body: Array(text.utf8))
    }
}
