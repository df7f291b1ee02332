import ShardRouter
import Synchronization

/// Sends commands to the Redis node that serves their slot: one server, or the masters of a
/// Redis Cluster. Keeps one `RedisConnection` per node it talks to; give each concurrent user
/// (a shard, a flusher) a client of its own so their pipelines never queue behind each other.
///
/// `execute(_:)` splits a pipeline of slot groups by master, sends one pipeline per master
/// (concurrently when there are several), and follows the cluster's answers (`SlotDispatch`):
/// `MOVED`, `ASK`, `TRYAGAIN`, `CLUSTERDOWN`. Against one server it sends exactly the pipeline
/// it was given. A connection that broke mid-pipeline leaves its groups' outcome unknown: they
/// fail with `.connectionLost`, never retried.
///
/// The calls are `nonisolated(nonsending)`: they run on the caller's executor (a shard's), so a
/// round trip costs the hop to the connection's thread and back, as a bare `RedisConnection`
/// does — a plain `async` method would hop to the global pool first, which cost the hot path
/// about 9 % of its throughput (measured with `counter-bench http --scenario hot`).
public final class RedisClient: Sendable {
    /// The slot map this client routes by, shared with the process's other clients.
    public let topology: RedisTopology
    private let connections = Mutex<[RedisEndpoint: RedisConnection]>([:])
    /// When set, this client's connections give up on a connect or a command this soon,
    /// whatever the topology's configuration says (a health check that must answer in time).
    private let timeout: Duration?

    /// - Parameter timeout: a connect and command timeout of this client's own, shorter than the
    ///   configuration's; `nil`: the configuration's.
    public init(topology: RedisTopology, timeout: Duration? = nil) {
        self.topology = topology
        self.timeout = timeout
    }

    /// A client of its own topology: one server or a cluster (which then still needs
    /// `topology.discover()`).
    public convenience init(configuration: RedisConfiguration) {
        self.init(topology: RedisTopology(configuration: configuration))
    }

    /// Sends `groups` and returns one result per group, in order: the replies of its commands
    /// (for an atomic group, those inside `EXEC`; error replies stay in their place), or why it
    /// did not run (or, for `.connectionLost`, may or may not have run).
    nonisolated(nonsending) public func execute(_ groups: [SlotCommands]) async -> [Result<[RedisReply], RedisError>] {
        await executeNotingOpenings(groups).results
    }

    /// `execute(_:)`, and which opening of each master's connection carried its pipelines: what
    /// `waitForReplicas(master:replicas:timeout:carriedBy:)` needs to ask about exactly those
    /// writes.
    nonisolated(nonsending) public func executeNotingOpenings(
        _ groups: [SlotCommands]
    ) async -> (results: [Result<[RedisReply], RedisError>], openings: RedisOpenings) {
        var openings = RedisOpenings()
        guard !groups.isEmpty else { return ([], openings) }
        var dispatch = SlotDispatch(groups, followsRedirects: topology.isCluster)
        while true {
            let map = topology.map
            let sends = dispatch.nextRound { map.master(of: $0) }
            if sends.isEmpty { break }
            let noted = await performNotingOpenings(sends)
            let outcomes = noted.map(\.outcome)
            for (send, carried) in zip(sends, noted) {
                if let opening = carried.opening { openings.note(send.endpoint, opening: opening) }
            }
            var refresh = false
            for (send, outcome) in zip(sends, outcomes) {
                for event in dispatch.receive(send, outcome) {
                    switch event {
                    case .moved(let slot, let endpoint): topology.noteMoved(slot, to: endpoint)
                    case .refreshMap: refresh = true
                    }
                }
            }
            if dispatch.isFinished { break }
            if refresh { await topology.refresh() }
            if let backoff = dispatch.backoff { try? await Task.sleep(for: backoff) }
        }
        for (endpoint, counters) in dispatch.counters { topology.record(endpoint, counters: counters) }
        if dispatch.sawClusterTrouble { topology.requestRefresh() }
        return (dispatch.results, openings)
    }

    /// `WAIT replicas timeout` on the master `endpoint`, on the opening of its connection that
    /// carried the writes in question (`carriedBy`, from `executeNotingOpenings`): `WAIT` counts
    /// the writes of its own connection, so on a connection opened since it would confirm none of
    /// them at once. Returns how many replicas have them, or why it could not tell:
    /// `.connectionLost` when that opening is gone (nothing sent) or none is known for
    /// `endpoint`; what `WAIT` itself failed with. (A `Result`, not typed throws: the release
    /// build of Swift 6.3.1 handed a task group garbage for this call's typed error.)
    public func waitForReplicas(
        master endpoint: RedisEndpoint, replicas: Int, timeout: Duration, carriedBy openings: RedisOpenings
    ) async -> Result<Int64, RedisError> {
        guard let opening = openings.opening(of: endpoint) else {
            return .failure(
                RedisError(
                    code: .connectionLost,
                    message: "\(endpoint): no single connection carried the writes to ask about (none went there, or they went on two)"))
        }
        let connection = self.connection(endpoint)
        let replies: [RedisReply]
        do {
            replies = try await connection.pipeline([.wait(replicas: replicas, timeout: timeout)], onOpening: opening)
        } catch {
            return .failure(RedisError(code: error.code, message: "\(endpoint): \(error.message)"))
        }
        switch replies[0] {
        case .integer(let count): return .success(count)
        case .error(let text): return .failure(RedisError.server("\(endpoint): \(text)"))
        case let other: return .failure(RedisError(code: .unexpectedReply, message: "\(endpoint): WAIT answered \(other)"))
        }
    }

    /// Sends `groups` and returns their replies, or throws the first group's failure.
    nonisolated(nonsending) public func executeAll(_ groups: [SlotCommands]) async throws(RedisError) -> [[RedisReply]] {
        var replies: [[RedisReply]] = []
        replies.reserveCapacity(groups.count)
        for result in await execute(groups) {
            switch result {
            case .success(let groupReplies): replies.append(groupReplies)
            case .failure(let error): throw error
            }
        }
        return replies
    }

    /// Sends `commands`, all of `slot`'s keys, in one pipeline; error replies stay in their place.
    nonisolated(nonsending) public func pipeline(_ commands: [RedisCommand], slot: HashSlot) async throws(RedisError) -> [RedisReply] {
        try await executeAll([SlotCommands(slot: slot, commands: commands)])[0]
    }

    /// Runs `commands`, all of `slot`'s keys, as one `MULTI … EXEC` and returns their replies.
    nonisolated(nonsending) public func transaction(_ commands: [RedisCommand], slot: HashSlot) async throws(RedisError) -> [RedisReply] {
        try await executeAll([SlotCommands(slot: slot, commands: commands, atomic: true)])[0]
    }

    /// Sends one command on `slot`'s node and returns its reply.
    /// - Throws: `RedisError(.server)` with Redis's text for an error reply; connection errors.
    @discardableResult
    nonisolated(nonsending) public func send(_ command: RedisCommand, slot: HashSlot) async throws(RedisError) -> RedisReply {
        try await pipeline([command], slot: slot)[0].throwingServerError()
    }

    /// `PING` to every master of the map (the one server, for a Redis that is not a cluster).
    /// - Throws: the first failure; `.clusterUnavailable` when slots have no master.
    public func pingMasters() async throws(RedisError) {
        let map = topology.map
        let uncovered = map.uncoveredSlots
        guard uncovered.isEmpty else {
            throw RedisError(code: .clusterUnavailable, message: "no master serves slots \(ClusterSlotMap.describe(uncovered))")
        }
        let sends = masters.map { SlotDispatch.Send(endpoint: $0, commands: [RedisCommand.ping()]) }
        for (send, outcome) in zip(sends, await perform(sends)) {
            switch outcome {
            case .success(let replies): _ = try replies[0].throwingServerError()
            case .failure(let error):
                throw RedisError(code: error.code, message: "\(send.endpoint): \(error.message)")
            }
        }
    }

    /// Returns once Redis serves: the slot map read (for a cluster) and every master answering
    /// `PING`. While Redis answers `LOADING` (reading its AOF or RDB after a restart, which can
    /// take minutes for a large data set) it asks again every `interval`, telling `waiting` how
    /// long it has waited each time.
    /// - Parameter shouldStop: asked before each wait; `true` gives up with the `LOADING` error.
    /// - Throws: any failure other than `LOADING` at once; `LOADING` when `shouldStop` says so or
    ///   the task is cancelled.
    nonisolated(nonsending) public func waitWhileLoading(
        interval: Duration = .milliseconds(250), shouldStop: () -> Bool = { false },
        waiting: (Duration, RedisError) -> Void
    ) async throws(RedisError) {
        let started = ContinuousClock.now
        while true {
            do {
                try await topology.discover()
                try await pingMasters()
                return
            } catch  where error.isLoading {
                if shouldStop() || Task.isCancelled { throw error }
                waiting(ContinuousClock.now - started, error)
                try? await Task.sleep(for: interval)
            }
        }
    }

    /// The masters of the map, in order (the one server, for a Redis that is not a cluster).
    public var masters: [RedisEndpoint] {
        Array(topology.map.slotCounts.keys).sorted()
    }

    /// Sends `commands` to the master `endpoint` in one pipeline, for commands that name no key
    /// (`SCAN`, `INFO`); error replies stay in their place.
    public func pipeline(_ commands: [RedisCommand], toMaster endpoint: RedisEndpoint) async throws(RedisError) -> [RedisReply] {
        switch await perform(SlotDispatch.Send(endpoint: endpoint, commands: commands)) {
        case .success(let replies): return replies
        case .failure(let error): throw RedisError(code: error.code, message: "\(endpoint): \(error.message)")
        }
    }

    /// Closes every connection; the next call opens new ones.
    public func close() async {
        let open = connections.withLock { connections in
            defer { connections = [:] }
            return Array(connections.values)
        }
        for connection in open { await connection.close() }
    }

    // MARK: - I/O

    /// One pipeline per endpoint, concurrently when there are several.
    nonisolated(nonsending) private func perform(_ sends: [SlotDispatch.Send]) async -> [Result<[RedisReply], RedisError>] {
        await performNotingOpenings(sends).map(\.outcome)
    }

    nonisolated(nonsending) private func perform(_ send: SlotDispatch.Send) async -> Result<[RedisReply], RedisError> {
        await performNotingOpening(send).outcome
    }

    /// `perform(_:)` for each send, with the opening of the connection that carried it.
    nonisolated(nonsending) private func performNotingOpenings(
        _ sends: [SlotDispatch.Send]
    ) async -> [(outcome: Result<[RedisReply], RedisError>, opening: UInt64?)] {
        if sends.count == 1 { return [await performNotingOpening(sends[0])] }
        return await withTaskGroup(of: (Int, Result<[RedisReply], RedisError>, UInt64?).self) { group in
            for (index, send) in sends.enumerated() {
                group.addTask {
                    let noted = await self.performNotingOpening(send)
                    return (index, noted.outcome, noted.opening)
                }
            }
            var noted = [(outcome: Result<[RedisReply], RedisError>, opening: UInt64?)](repeating: (.success([]), nil), count: sends.count)
            for await (index, outcome, opening) in group { noted[index] = (outcome, opening) }
            return noted
        }
    }

    nonisolated(nonsending) private func performNotingOpening(
        _ send: SlotDispatch.Send
    ) async -> (outcome: Result<[RedisReply], RedisError>, opening: UInt64?) {
        let connection = self.connection(send.endpoint)
        do {
            let (replies, opening) = try await connection.pipelineNotingOpening(send.commands)
            topology.record(send.endpoint, pipelines: 1)
            return (.success(replies), opening)
        } catch {
            topology.record(send.endpoint, pipelines: 1, error: error)
            if error.code == .connectionLost || error.code == .connectionFailed { topology.requestRefresh() }
            return (.failure(error), nil)
        }
    }

    private func connection(_ endpoint: RedisEndpoint) -> RedisConnection {
        connections.withLock { connections in
            if let known = connections[endpoint] { return known }
            var configuration = topology.configuration.node(endpoint)
            if let timeout {
                configuration.connectTimeout = min(configuration.connectTimeout, timeout)
                configuration.commandTimeout = min(configuration.commandTimeout, timeout)
            }
            let connection = RedisConnection(configuration: configuration)
            connections[endpoint] = connection
            return connection
        }
    }
}

/// Which opening (`RedisConnection.opening`) of each master's connection carried a call's
/// pipelines (`RedisClient.executeNotingOpenings`).
public struct RedisOpenings: Sendable, Equatable {
    private var byEndpoint: [RedisEndpoint: UInt64] = [:]
    /// Masters whose pipelines went on two openings: no one connection can vouch for them all.
    private var split: Set<RedisEndpoint> = []

    public init() {}

    /// A pipeline to `endpoint` went on `opening`.
    public mutating func note(_ endpoint: RedisEndpoint, opening: UInt64) {
        if let known = byEndpoint[endpoint], known != opening { split.insert(endpoint) }
        byEndpoint[endpoint] = opening
    }

    /// Adds what `other` noted.
    public mutating func merge(_ other: RedisOpenings) {
        for (endpoint, opening) in other.byEndpoint { note(endpoint, opening: opening) }
        split.formUnion(other.split)
    }

    /// The one opening that carried every pipeline to `endpoint`; `nil` when none went there or
    /// they went on two.
    public func opening(of endpoint: RedisEndpoint) -> UInt64? {
        split.contains(endpoint) ? nil : byEndpoint[endpoint]
    }
}
