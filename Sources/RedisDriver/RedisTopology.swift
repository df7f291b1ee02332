import CounterCore
import ShardRouter
import Synchronization

/// Where each hash slot lives: one Redis for all of them, or the masters of a Redis Cluster —
/// shared by every `RedisClient` of a process, with per-node statistics.
///
/// For a cluster, `discover()` reads the slot map from the seed nodes (`CLUSTER SLOTS`) and
/// refuses a seed that is not a cluster node or a map with slots no master serves. Afterwards the
/// map is read again after redirects and connection failures (`refresh()`), and every
/// `topologyRefreshPeriod` while `run()` runs; a `MOVED` answer updates its slot at once.
public final class RedisTopology: Sendable {
    /// The deployment: one server or a cluster, its seeds, timeouts and limits.
    public let configuration: RedisConfiguration
    private let state: Mutex<State>
    /// Rung when a read of the map is wanted soon (`requestRefresh`, a `MOVED`).
    private let refreshAlarm = LoopAlarm()
    private let control: TopologyReader
    private let log: NodeLog

    private struct State {
        var map: ClusterSlotMap
        var nodes: [RedisEndpoint: RedisNodeState] = [:]
        var refreshes = 0
        var lastRefresh: ContinuousClock.Instant?
        var lastRefreshError: String?
        var refreshWanted = false
        /// Hears of slots whose master failed over (`onFailover`).
        var failoverHandler: (@Sendable ([UInt16]) -> Void)?
        /// Slots seen failing over, in all.
        var failedOverSlots = 0
    }

    /// A topology for `configuration`. One server serves every slot at once; a cluster serves
    /// none until `discover()`.
    /// - Parameter log: hears when a node stops answering and when it answers again.
    public init(configuration: RedisConfiguration, log: NodeLog = .silent) {
        self.configuration = configuration
        self.log = log
        let map =
            configuration.mode == .single
            ? ClusterSlotMap(single: RedisEndpoint(host: configuration.host, port: configuration.port))
            : ClusterSlotMap()
        state = Mutex(State(map: map))
        control = TopologyReader(configuration: configuration)
    }

    /// Whether this is a Redis Cluster (redirects are followed) rather than one server.
    public var isCluster: Bool { configuration.mode == .cluster }

    /// The slot map of this moment.
    public var map: ClusterSlotMap { state.withLock { $0.map } }

    /// Reads the cluster's slot map from the seed nodes, once (later calls return at once: the
    /// map is kept current by redirects, `refresh()` and `run()`); for one server, does nothing.
    /// - Throws: `RedisError(.clusterConfiguration)` when a seed answers but is not a cluster
    ///   node, or the cluster leaves slots without a master; `.connectionFailed` when no seed
    ///   can be reached.
    public func discover() async throws(RedisError) {
        guard isCluster, state.withLock({ $0.refreshes == 0 }) else { return }
        let found = try await control.read(candidates: configuration.seeds, strict: true)
        install(found)
    }

    /// Reads the slot map again (cluster only), at most once per 50 ms however many callers
    /// ask; keeps the old map when no node answers.
    public func refresh() async {
        guard isCluster else { return }
        if let last = state.withLock({ $0.lastRefresh }), ContinuousClock.now - last < .milliseconds(50) { return }
        let candidates = state.withLock { state in state.map.masters } + configuration.seeds
        do {
            install(try await control.read(candidates: candidates, strict: false))
        } catch {
            state.withLock { state in
                state.lastRefresh = .now
                state.lastRefreshError = error.message
            }
        }
    }

    /// Asks `run()` to read the map soon, without waiting for it.
    func requestRefresh() {
        state.withLock { $0.refreshWanted = true }
        refreshAlarm.ring()
    }

    /// Until cancelled: reads the cluster's map every `topologyRefreshPeriod`, and at once after a
    /// `requestRefresh()` (or a `MOVED`); a read that fails while one is wanted is tried again
    /// every 100 ms. Returns at once for one server.
    public func run() async {
        guard isCluster else { return }
        let period = configuration.topologyRefreshPeriod
        while !Task.isCancelled {
            let due = state.withLock { state in
                state.refreshWanted || state.lastRefresh.map { ContinuousClock.now - $0 >= period } ?? true
            }
            if due {
                await refresh()
                if state.withLock({ $0.refreshWanted }) {
                    try? await Task.sleep(for: .milliseconds(100))
                    continue
                }
            }
            await refreshAlarm.sleep(until: (state.withLock { $0.lastRefresh } ?? .now) + period)
        }
    }

    /// Closes the connections used to read the map.
    public func close() async {
        await control.close()
    }

    /// Every node this process knows of — the masters of the map, and nodes that answered or
    /// failed — with what it saw of each.
    public func nodeStates() -> [RedisNodeState] {
        state.withLock { state in
            var nodes = state.nodes
            let slotCounts = state.map.slotCounts
            for endpoint in Set(nodes.keys).union(slotCounts.keys) {
                nodes[endpoint, default: RedisNodeState(endpoint: endpoint)].slots = slotCounts[endpoint] ?? 0
            }
            return nodes.values.sorted { $0.endpoint < $1.endpoint }
        }
    }

    /// The map's refresh history: how many reads, how long since the last, its last failure.
    public func refreshState() -> (refreshes: Int, secondsSinceRefresh: Double?, lastError: String?) {
        state.withLock { state in
            (state.refreshes, state.lastRefresh.map { (ContinuousClock.now - $0).inSeconds }, state.lastRefreshError)
        }
    }

    // MARK: - What clients report

    func noteMoved(_ slot: HashSlot, to endpoint: RedisEndpoint) {
        let (promoted, handler) = state.withLock { state in (state.map.isPromotion(of: slot, to: endpoint), state.failoverHandler) }
        // The failover is told before the map sends anything to the promoted replica (see
        // `onFailover`).
        if promoted { handler?([slot.rawValue]) }
        state.withLock { state in
            state.map.move(slot, to: endpoint)
            state.refreshWanted = true
            if promoted { state.failedOverSlots += 1 }
        }
        refreshAlarm.ring()
    }

    /// Calls `handler` (from the thread that noticed) with the slots whose master failed over:
    /// a replica of their master serves them now, in a map read again or by a `MOVED` answer.
    /// What that master acknowledged and had not replicated is gone from Redis. The handler is
    /// called before the map routes anything to the promoted replica, so whatever the handler
    /// tells (a shard's inbox) learns of the failover before any reply from that replica —
    /// nothing read there is taken for what the old master held. One handler; a later call
    /// replaces it.
    public func onFailover(_ handler: @escaping @Sendable ([UInt16]) -> Void) {
        state.withLock { $0.failoverHandler = handler }
    }

    /// Slots seen failing over since the process started.
    public var failedOverSlots: Int { state.withLock { $0.failedOverSlots } }

    /// The least time between two log lines about one node's connections.
    static let nodeLogInterval: Duration = .seconds(10)

    /// Notes `endpoint`'s memory as read from `INFO memory`.
    public func recordMemory(_ endpoint: RedisEndpoint, _ memory: RedisMemoryInfo) {
        state.withLock { state in
            var node = state.nodes[endpoint, default: RedisNodeState(endpoint: endpoint)]
            node.usedMemoryBytes = memory.usedBytes
            node.maximumMemoryBytes = memory.maximumBytes
            state.nodes[endpoint] = node
        }
    }

    func record(_ endpoint: RedisEndpoint, pipelines: Int = 0, error: RedisError? = nil, counters: SlotDispatch.Counters? = nil) {
        // A node that stops answering, and one that answers again after that, are logged once
        // per change, not per call — and a node whose connections disagree (one keeps failing
        // while others work) at most once per `nodeLogInterval` each way.
        enum Change { case lost, back }
        let change: Change? = state.withLock { state in
            var node = state.nodes[endpoint, default: RedisNodeState(endpoint: endpoint)]
            var change: Change?
            node.pipelines += pipelines
            if let error {
                node.errors += 1
                node.lastError = error.message
                if error.code == .connectionFailed || error.code == .connectionLost {
                    let now = ContinuousClock.now
                    if !node.reportedLost, node.lastReport.map({ now - $0 >= Self.nodeLogInterval }) ?? true {
                        change = .lost
                        node.reportedLost = true
                        node.lastReport = now
                    }
                    node.connected = false
                }
            } else if pipelines > 0 {
                if node.reportedLost {
                    change = .back
                    node.reportedLost = false
                    node.lastReport = .now
                }
                node.connected = true
            }
            if let counters {
                node.moved += counters.moved
                node.ask += counters.ask
                node.tryAgain += counters.tryAgain
                node.clusterDown += counters.clusterDown
            }
            state.nodes[endpoint] = node
            return change
        }
        switch change {
        case .lost?: log.log(.warn, "redis_node_unreachable", ["node": endpoint.description, "error": error?.message ?? ""])
        case .back?: log.log(.info, "redis_node_reconnected", ["node": endpoint.description])
        case nil: break
        }
    }

    /// Puts `map` in place of the one held, telling the failover handler first of the slots it
    /// gives to a replica of their master (tests install maps of their own).
    func install(_ map: ClusterSlotMap) {
        let (promoted, handler) = state.withLock { state -> ([UInt16], (@Sendable ([UInt16]) -> Void)?) in
            (state.refreshes == 0 ? [] : state.map.promotedSlots(in: map), state.failoverHandler)
        }
        if !promoted.isEmpty {
            log.log(
                .warn, "redis_failover",
                [
                    "slots": ClusterSlotMap.describe(SlotSet(ranges: promoted.map { Int($0)...Int($0) }).ranges),
                    "count": String(promoted.count),
                ])
            // Told before the map sends anything to the promoted replicas (see `onFailover`).
            handler?(promoted)
        }
        state.withLock { state in
            var installed = map
            installed.rememberReplicas(of: state.map)
            state.map = installed
            state.refreshes += 1
            state.lastRefresh = .now
            state.lastRefreshError = nil
            state.refreshWanted = false
            state.failedOverSlots += promoted.count
        }
    }
}

/// What one process saw of one Redis node.
public struct RedisNodeState: Sendable, Equatable {
    public let endpoint: RedisEndpoint
    /// Hash slots the node serves in the current map (0 for a node that is not a master).
    public var slots = 0
    /// Whether the last round trip to it succeeded.
    public var connected = false
    /// Whether the log was told the node is unreachable (so its next success is a reconnect),
    /// and when the log last heard of the node.
    var reportedLost = false
    var lastReport: ContinuousClock.Instant?
    /// Pipelines sent to it.
    public var pipelines = 0
    /// Failed round trips (connection failures included) and the last one's message.
    public var errors = 0
    public var lastError: String?
    /// Cluster answers it gave: `MOVED`, `ASK`, `TRYAGAIN`/`LOADING`, `CLUSTERDOWN`.
    public var moved = 0
    public var ask = 0
    public var tryAgain = 0
    public var clusterDown = 0
    /// Its memory as last read (`INFO memory`): `used_memory`, and `maxmemory` (`nil`: no
    /// limit, or not read yet).
    public var usedMemoryBytes: Int?
    public var maximumMemoryBytes: Int?

    public init(endpoint: RedisEndpoint) {
        self.endpoint = endpoint
    }
}

/// Reads `CLUSTER SLOTS` from the first node that answers, over connections of its own.
private actor TopologyReader {
    let configuration: RedisConfiguration
    private var connections: [RedisEndpoint: RedisConnection] = [:]
    /// Nodes seen in earlier answers (replicas included), asked when the others fail.
    private var knownNodes: [RedisEndpoint] = []

    init(configuration: RedisConfiguration) {
        self.configuration = configuration
    }

    /// Asks `candidates`, then every node seen before, until one gives a map that covers every
    /// slot; without one, the answer that covers most.
    /// - Parameter strict: at start — a node that is not a cluster, or a map with holes, is a
    ///   configuration error.
    func read(candidates: [RedisEndpoint], strict: Bool) async throws(RedisError) -> ClusterSlotMap {
        var order: [RedisEndpoint] = []
        for endpoint in candidates + knownNodes where !order.contains(endpoint) { order.append(endpoint) }
        var best: ClusterSlotMap?
        var failures: [String] = []
        for endpoint in order {
            let connection = self.connection(endpoint)
            let reply: RedisReply
            do {
                reply = try await connection.send(RedisCommand("CLUSTER", "SLOTS"))
            } catch {
                if error.code == .server && error.message.contains("cluster support disabled") {
                    throw RedisError(
                        code: .clusterConfiguration,
                        message:
                            "Redis at \(endpoint) is not a cluster node (cluster support disabled); use a redis:// URL for one server, or point redis-cluster:// at the nodes of a Redis Cluster"
                    )
                }
                failures.append("\(endpoint): \(error.message)")
                continue
            }
            let map = try ClusterSlotMap(clusterSlots: reply, askedHost: endpoint.host)
            for node in map.masters + map.replicas where !knownNodes.contains(node) { knownNodes.append(node) }
            if map.uncoveredSlotCount == 0 { return map }
            if strict {
                throw RedisError(
                    code: .clusterConfiguration,
                    message:
                        "the Redis Cluster at \(endpoint) leaves slots without a master: \(ClusterSlotMap.describe(map.uncoveredSlots)) (cluster_state is not ok; assign every slot, e.g. redis-cli --cluster fix)"
                )
            }
            if map.uncoveredSlotCount < best?.uncoveredSlotCount ?? Int.max { best = map }
        }
        if let best { return best }
        throw RedisError(
            code: .connectionFailed,
            message: "no Redis Cluster node answered CLUSTER SLOTS (\(failures.joined(separator: "; ")))")
    }

    func close() async {
        for connection in connections.values { await connection.close() }
        connections = [:]
    }

    private func connection(_ endpoint: RedisEndpoint) -> RedisConnection {
        if let known = connections[endpoint] { return known }
        let connection = RedisConnection(configuration: configuration.node(endpoint))
        connections[endpoint] = connection
        return connection
    }
}
