import CounterCore
import Dispatch
import Foundation
import NodeAPI
import NodeCluster
import NodeHTTP
import Persistence
import PostgresDriver
import RedisDriver
import Synchronization
import UserTokens
import WritePath

/// `counter-node serve`, the composition root: builds the node's parts (`NodeParts`) and runs
/// them as one `ServiceGroup` — started in order (the end users' keys, the write path, the
/// schema, the HTTP server, the cluster membership, the announcement, the readiness checks),
/// stopped in reverse — until SIGTERM or SIGINT (`ShutdownSignals`). A failure at any start step
/// stops, in reverse, what already started (the write path drains). The shutdown takes at most
/// `--shutdown-timeout`, leaving what is not flushed by then in the Redis logs
/// (`ShutdownDeadline`); a second signal exits at once. Every connection opened here is closed
/// here.
public enum NodeServer {
    public static func run(_ configuration: NodeConfiguration, output: NodeCommand.Output) async -> NodeCommand.ExitStatus {
        if let refusal = configuration.servingRefusal {
            output.error(refusal)
            return .usage
        }
        let log = NodeLog(minimum: configuration.logLevel, format: configuration.logFormat)
        // Signals are taken before anything starts, so none is missed.
        let signals = ShutdownSignals()
        // A write to a connection whose other end has gone fails (EPIPE) instead of ending the
        // process: the HTTP engine's, hiredis's and any other library's sockets and pipes alike,
        // as every server does. (Children get the default back: `ProcessSpawn`.)
        signal(SIGPIPE, SIG_IGN)
        let parts: NodeParts
        do {
            parts = try NodeParts(configuration: configuration, log: log, output: output)
        } catch {
            output.error("cannot start: \(error)")
            return .usage
        }
        let deadline = ShutdownDeadline(timeout: configuration.shutdownTimeout, service: parts.service, log: log)
        let startedAll = Atomic<Bool>(false)
        var failure: Error?
        await withTaskGroup(of: Void.self) { group in
            let (firstSignal, signalled) = AsyncStream<Void>.makeStream()
            // The first signal stops the group; from then on the shutdown's deadline runs, and a
            // second signal exits at once.
            group.addTask {
                guard let first = await signals.next() else { return }
                log.log(
                    .info, "shutting_down",
                    [
                        "signal": first == SIGINT ? "SIGINT" : "SIGTERM",
                        "timeout_s": String(configuration.shutdownTimeoutSeconds),
                    ])
                // Load balancers stop sending here while the slots are handed off.
                parts.api.markShuttingDown()
                signalled.finish()
                await withTaskGroup(of: Void.self) { stopping in
                    stopping.addTask { await deadline.run() }
                    if await signals.next() != nil {
                        log.log(.warn, "exiting_now", ["reason": "second signal"])
                        exit(130)
                    }
                    stopping.cancelAll()
                }
            }
            do {
                try await ServiceGroup.run(parts.services, whenStarted: { startedAll.store(true, ordering: .releasing) }) {
                    for await _ in firstSignal {}
                }
            } catch {
                failure = error
            }
            // The services have stopped: the signals and the deadline no longer matter.
            group.cancelAll()
        }
        signals.stop()
        await parts.close()
        guard let failure else {
            if deadline.hasExpired {
                // What is left waits in the Redis logs; the next start (or the slots' next owner) flushes it.
                let left = ShutdownDeadline.summary(await parts.service.pendingBySlot())
                log.log(.warn, "stopped", ["flushed": "false", "left_changes": left.changes, "left_slots": left.slotCount, "slots": left.slots])
            } else {
                log.log(.info, "stopped", ["flushed": "true"])
            }
            return .success
        }
        if !startedAll.load(ordering: .acquiring) {
            output.error("cannot start: \(failure)")
            if let error = failure as? RedisError, error.code == .clusterConfiguration { return .usage }
            return .failure
        }
        output.error("cannot serve: \(failure)")
        log.log(.error, "failed", ["error": "\(failure)"])
        return .failure
    }
}

/// What `serve` builds before anything starts: the pools, the write path, the membership, the
/// API and the HTTP server, and the order they run in.
struct NodeParts {
    let service: CounterService
    let api: CounterAPI
    let services: [any Service]
    private let pool: PostgresPool
    private let membershipPool: PostgresPool
    private let leasePool: PostgresPool
    private let eventsPool: PostgresPool
    private let adminRedis: RedisClient

    /// - Throws: for settings that cannot be used (a Redis URL, the write path's figures, the
    ///   end users' secret or key set), or when the API cannot make its connections to the other
    ///   nodes; nothing was opened then.
    init(configuration: NodeConfiguration, log: NodeLog, output: NodeCommand.Output) throws {
        let redis = try RedisConfiguration(url: configuration.redisURL)
        let users = configuration.users.isEnabled ? try UserAccess(configuration: configuration.users) : nil
        let pool = PostgresPool(configuration: configuration.postgres)
        // A node of a cluster (possibly of one): it serves only the slots it wins.
        let service = try CounterService(
            configuration: configuration.nodeWritePath, postgres: pool, redis: redis,
            ownership: OwnedSlots(), log: log)
        let adminRedis = RedisClient(topology: service.redisTopology)
        // The membership has connections of its own: a lease renewal must never wait behind
        // flushes (or behind a claim waiting for a paused node's locks) for a pooled connection.
        let membershipPool = PostgresPool(configuration: configuration.membershipPostgres(connections: 2))
        // Renewals commit without waiting for the disk: one lost in a PostgreSQL crash only makes
        // the lease look shorter (fencing covers what follows), while waiting behind the flushes'
        // WAL flushes made renewals late by seconds under load (measured).
        var leaseConfiguration = configuration.membershipPostgres(connections: 1)
        leaseConfiguration.asynchronousCommit = true
        let leasePool = PostgresPool(configuration: leaseConfiguration)
        let member = ClusterMember(
            configuration: configuration.membership(advertiseURL: configuration.advertiseURLSetting ?? ""),
            service: service, postgres: membershipPool, leasePostgres: leasePool, log: log)
        // With events on, every node prunes the outbox (taking turns) to --event-retention.
        let retention =
            configuration.writePath.events
            ? configuration.eventRetention.map { EventRetention(retention: $0, events: LikeEvents(pool: pool), log: log) } : nil
        let eventsPool = PostgresPool(configuration: configuration.eventsPostgres(connections: 2))
        let storage = NodeStorage(
            postgres: pool, redis: adminRedis, layout: RedisKeyLayout(prefix: configuration.writePath.keyPrefix),
            eventsPostgres: eventsPool)
        let api = try CounterAPI(
            service: service, tokens: configuration.tokens, storage: storage, member: member,
            readyMaxLag: configuration.readyMaxLag, users: users, retention: retention, log: log)
        let server = try HTTPServer(configuration: configuration.http, handler: api)

        // Started in this order, stopped in reverse: the membership hands the slots to the other
        // nodes while the HTTP server still answers (forwarding), then the server stops, then
        // the write path drains what it still holds.
        // The API's requests that wait (reads of PostgreSQL, forwarding, admin) run under the
        // first service, which stops last: whatever they wait for has answered by then.
        var services: [(String, any Service)] = [("requests", api)]
        if let users, let source = users.keySetSource {
            services.append(
                (
                    "user_keys",
                    UserKeySetService(
                        source: source, verifier: users.verifier,
                        interval: configuration.users.keySetRefresh, log: log)
                ))
        }
        services += [
            ("write_path", service),
            (
                "schema",
                SchemaPreparation(
                    pool: pool, migrate: configuration.migrateOnStart, demoPosts: configuration.demoPosts,
                    reactions: configuration.writePath.reactions, log: log)
            ),
            ("http", server),
            ("membership", MembershipService(member: member, server: server, configuration: configuration)),
            ("announcement", ListeningAnnouncement(server: server, configuration: configuration, log: log, output: output)),
        ]
        if let retention { services.append(("event_retention", retention)) }
        // Last: the checks /metrics reports need the write path and the membership running.
        services.append(("readiness", api.readinessSchedule))
        self.services = services.map { NamedService(name: $0.0, service: $0.1, log: log) }
        self.service = service
        self.api = api
        self.pool = pool
        self.membershipPool = membershipPool
        self.leasePool = leasePool
        self.eventsPool = eventsPool
        self.adminRedis = adminRedis
    }

    /// Closes what the services do not close themselves.
    func close() async {
        await adminRedis.close()
        await membershipPool.close()
        await leasePool.close()
        await eventsPool.close()
        await pool.close()
    }
}

/// SIGTERM and SIGINT, delivered as an async stream instead of their default action.
// @unchecked Sendable: the signal sources are only kept alive here and cancelled once; the
// stream has one reader (the node's signal watcher).
final class ShutdownSignals: @unchecked Sendable {
    private let stream: AsyncStream<Int32>
    private let continuation: AsyncStream<Int32>.Continuation
    private let sources: [any DispatchSourceSignal]

    init(signals: [Int32] = [SIGTERM, SIGINT]) {
        (stream, continuation) = AsyncStream<Int32>.makeStream()
        let yield = continuation
        sources = signals.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            // Signals delivered before the handler runs are merged into one event whose `data`
            // says how many: each is passed on. (Two sent before the kernel delivers the first
            // are one already: it keeps one pending signal of each kind.) The handler holds its
            // source until `stop()` cancels it, which releases the handler.
            source.setEventHandler { [source] in
                for _ in 0..<max(source.data, 1) { yield.yield(number) }
            }
            source.resume()
            return source
        }
    }

    /// The next signal; `nil` once stopped or when the task is cancelled.
    func next() async -> Int32? {
        var iterator = stream.makeAsyncIterator()
        return await iterator.next()
    }

    /// No more signals are taken here.
    func stop() {
        for source in sources { source.cancel() }
        continuation.finish()
    }
}
