import CounterCore
import NodeCluster
import NodeHTTP
import Persistence
import WritePath

/// The HTTP API (README, "HTTP API") on top of a `CounterService`: the routes of `APIRoutes`,
/// each answered by its handler inside the middleware of `RequestChain` (metrics, tokens, write
/// limits, forwarding, errors). Requests that need no I/O (health, routing and auth errors) are
/// answered on the HTTP thread; likes go straight to the shards; the rest run on tasks.
public final class CounterAPI: HTTPHandler, Service {
    let service: CounterService
    /// End users' tokens and write limits; `nil`: no user routes.
    let users: UserAccess?
    let inspector: PostInspector
    let reconciler: Reconciler
    let deadLetters: DeadLetters
    /// The lists of likers and of a user's likes.
    let lists: LikeListAnswers
    let readiness: ReadinessProbe
    /// The node's cluster membership, when it is one node of several.
    let member: ClusterMember?
    /// The connections of the cluster-wide operator calls to the other nodes, a few per node:
    /// `quick` ones give up on a node after 15 s (one stopped, or cut off); `patient` ones wait
    /// as long as a flush may take (its caller gives up sooner, at its own timeout).
    let adminPeers: (quick: PeerClient, patient: PeerClient)?
    /// The change events (`GET /v1/events`) and their long polls.
    let events: EventFeedAnswers
    /// The events' pruning, for `/metrics`.
    let retention: EventRetention?
    /// The storage the API reads beside the write path.
    let storage: NodeStorage
    /// The middleware around the handlers, and the request tasks.
    let chain: RequestChain

    /// - Parameters:
    ///   - storage: what the API reads beside the write path; build it with a Redis client of the
    ///     service's topology (`RedisClient(topology: service.redisTopology)`), and give it a pool
    ///     of its own for the change events (`eventsPostgres`), so a consumer does not wait behind
    ///     the flushes for a connection.
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
    /// - Throws: `HTTPServerError` when a node of a cluster cannot make its connections to the
    ///   other nodes (their epoll loops); nothing is left running then.
    public init(
        service: CounterService, tokens: AccessTokens, storage: NodeStorage, member: ClusterMember? = nil,
        readyMaxLag: Duration? = nil, users: UserAccess? = nil, retention: EventRetention? = nil, log: NodeLog = .silent
    ) throws {
        self.retention = retention
        self.storage = storage
        self.service = service
        self.users = users
        self.member = member
        let forwarder = try member.map { try Forwarder(member: $0, ownerWait: service.configuration.slotMoveWait) }
        self.adminPeers =
            member == nil
            ? nil
            : (
                quick: try PeerClient(maximumConnectionsPerPeer: 8, timeout: .seconds(15)),
                patient: try PeerClient(maximumConnectionsPerPeer: 8, timeout: .seconds(3_600))
            )
        self.inspector = PostInspector(service: service)
        self.readiness = ReadinessProbe(servers: storage.servers, member: member, service: service, maxLag: readyMaxLag)
        self.reconciler = Reconciler(records: storage.records, service: service)
        self.deadLetters = DeadLetters(service: service, stream: storage.deadLetters)
        self.lists = LikeListAnswers(service: service, lists: storage.lists)
        let tasks = RequestTasks()
        self.events = EventFeedAnswers(
            events: storage.eventFeed,
            watch: EventWatch(
                events: storage.eventFeed, wake: service.flushCommits,
                start: { tasks.start($0) }),
            reactions: !service.reactions.isLikesOnly)
        let errors = ErrorAnswers(failures: FailureLog(log: log))
        self.chain = RequestChain(
            admission: Admission(authentication: Authentication(tokens: tokens, users: users)),
            writeLimit: UserWriteLimit(limiter: users?.limiter, ownership: service.ownership, forwards: forwarder != nil),
            forwarding: SlotForwarding(forwarder: forwarder, member: member, errors: errors),
            errors: errors, service: service, tasks: tasks)
    }

    /// Sends requests for slots other nodes serve on to them (in a cluster).
    var forwarding: SlotForwarding { chain.forwarding }

    /// As a `Service`: runs the requests that wait (everything but the hot like routes) until
    /// asked to stop, then waits for those under way. It starts before the write path and stops
    /// after it, so nothing such a request waits for is left unanswered.
    public func run(_ lifecycle: ServiceLifecycle) async throws {
        await chain.tasks.run(lifecycle)
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
        _ = chain.tasks.start { await watch.releaseAll() }
    }

    /// Routes once and answers (`RequestChain`): refusals and health at once, like/unlike/toggle/
    /// read from the shard's completion (no task per request), everything else from a task.
    public func dispatch(_ request: HTTPRequest) -> HTTPDisposition {
        chain.dispatch(request, api: self)
    }

    /// The headers of the API beyond `Authorization`: who forwarded a request here, and the
    /// user a trusted backend acts for.
    public var requestHeaders: [String] { ["Counter-Forwarded-By", "Counter-User"] }

    /// The transport's own refusals, in the API's error format.
    public func response(for refusal: HTTPRefusal) -> HTTPResponse {
        ErrorAnswers.refusal(refusal)
    }
}
