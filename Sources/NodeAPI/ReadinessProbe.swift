import CounterCore
import CounterWire
import Foundation
import NodeCluster
import NodeHTTP
import Persistence
import Synchronization
import WritePath

/// `/readyz`: ready while Redis (every master, for a cluster with every slot served) answers,
/// the oldest change waiting for PostgreSQL is younger than `maxLag` (when set), the node is not
/// shutting down, and — for a node of a cluster — it serves every slot the map gives it (none
/// still being acquired, its log drained, or released) and its lease lets it decide. PostgreSQL
/// not answering makes a node of a cluster unready only once its lease no longer holds: while
/// PostgreSQL fails over, every node keeps taking writes into Redis, and a balancer that took
/// them all out of rotation would refuse everything instead (`maxLag` still bounds how long). A
/// node without a cluster membership is unready while PostgreSQL does not answer. Otherwise 503
/// with every reason. Cached for a second so probes cost little (shutting down, and the lease
/// letting the node decide or no longer, show at once).
///
/// `/metrics` reports the last check's verdict (`isReady`) and runs none itself; the checks run
/// on `/readyz` and on a schedule of their own (`ReadinessSchedule`), so the verdict is never
/// older than the schedule's interval.
actor ReadinessProbe {
    private let servers: StorageServers
    private let member: ClusterMember?
    private let service: CounterService
    private let maxLag: Duration?
    private let shuttingDown = Atomic<Bool>(false)
    /// The last verdict, when it was reached, and whether the lease let the node decide then.
    private var last: (at: ContinuousClock.Instant, deciding: Bool?, response: HTTPResponse)?

    init(servers: StorageServers, member: ClusterMember?, service: CounterService, maxLag: Duration?) {
        self.servers = servers
        self.member = member
        self.service = service
        self.maxLag = maxLag
    }

    nonisolated func markShuttingDown() {
        shuttingDown.store(true, ordering: .relaxed)
    }

    func check() async -> HTTPResponse {
        if shuttingDown.load(ordering: .relaxed) {
            return .error(.notReady, message: "the node is shutting down", retryAfterSeconds: 1)
        }
        // A node that stops (or starts again) deciding is told at once, not a cached second later.
        let deciding = member?.lease.isValid(at: .now)
        if let last, ContinuousClock.now - last.at < .seconds(1), last.deciding == deciding { return last.response }
        var problems: [String] = []
        var warnings: [String] = []
        do { try await servers.pingRedis() } catch { problems.append("redis: \(error)") }
        do { try await servers.pingPostgres() } catch {
            if let lease = member?.lease, lease.isValid(at: .now), let until = lease.validUntil {
                warnings.append(
                    String(
                        format: "postgres: %@; writes go on into Redis while the lease holds (%.1f s more)", "\(error)",
                        (until - .now).inSeconds))
            } else {
                problems.append("postgres: \(error)")
            }
        }
        if let maxLag {
            let oldest = await service.stats().map(\.oldestPendingAgeSeconds).max() ?? 0
            if oldest > maxLag.inSeconds {
                problems.append(
                    String(
                        format: "write-behind: the oldest change waiting for PostgreSQL is %.1f s old (limit %.0f s)",
                        oldest, maxLag.inSeconds))
            }
        }
        if let member {
            let map = member.map
            let me = member.configuration.nodeID
            let states = service.ownership.snapshot()
            var unsettled = 0
            for (slot, row) in map.slots.enumerated() where slot < states.count {
                let mine = row.owner.map { map.nodes[$0].id == me } ?? false
                switch states[slot] {
                case .serving: if !mine { unsettled += 1 }
                case .notOwned: if mine { unsettled += 1 }
                case .acquiring, .releasing: unsettled += 1
                }
            }
            if map.slots.isEmpty { problems.append("cluster: the slot map has not been read yet") }
            if !member.lease.isValid(at: .now) {
                problems.append("cluster: no lease renewal got through in time; this node does not decide for its slots")
            }
            if unsettled > 0 { problems.append("cluster: \(unsettled) slot(s) of this node are still moving") }
        }
        let response: HTTPResponse
        if problems.isEmpty {
            let body =
                warnings.isEmpty
                ? OperationHandlers.ready : (try? WireEncoder.encode(HealthStatus(status: "ready", warnings: warnings))) ?? OperationHandlers.ready
            response = HTTPResponse(status: 200, body: body)
        } else {
            response = .error(.notReady, message: problems.joined(separator: "; "), retryAfterSeconds: 1)
        }
        last = (.now, deciding, response)
        return response
    }

    /// The last check's verdict, without a check of its own — but for the very first, which
    /// it waits for when none has finished yet. `false` from the moment the node shuts down.
    func isReady() async -> Bool {
        if shuttingDown.load(ordering: .relaxed) { return false }
        if let last { return last.response.status == 200 }
        return await check().status == 200
    }

    /// Checks every `interval` (a check of `/readyz` within the last second stands for one)
    /// until the task is cancelled.
    func keepChecking(every interval: Duration) async {
        while !Task.isCancelled {
            _ = await check()
            try? await Task.sleep(for: interval)
        }
    }
}
