import CounterCore
import Dispatch
import Foundation
import NodeAPI
import NodeCluster
import NodeHTTP
import Persistence
import Synchronization
import UserTokens
import WritePath

/// `counter-node serve`, the composition root: reads Redis's shape, migrates, recovers the write
/// path, then runs the write path and the HTTP server as one `ServiceGroup` until SIGTERM or
/// SIGINT. The first signal stops the HTTP server (it answers what is in flight), then the write
/// path (it flushes everything to PostgreSQL), and the process exits 0 — after at most
/// `--shutdown-timeout`, leaving what is not flushed by then in the Redis logs
/// (`ShutdownDeadline`); a second signal exits at once. If the HTTP server cannot start, the write path that already started is stopped the
/// same way. Every connection opened here is closed here.
public enum NodeServer {
    public static func run(_ configuration: NodeConfiguration, output: NodeCommand.Output) async -> NodeCommand.ExitStatus {
        if let refusal = configuration.servingRefusal {
            output.error(refusal)
            return .usage
        }
        let log = NodeLog(minimum: configuration.logLevel, format: configuration.logFormat)
        // Signals are taken before anything starts, so none is missed.
        let signals = SignalStream(signals: [SIGTERM, SIGINT])

        let pool = PostgresPool(configuration: configuration.postgres)
        let service: CounterService
        do {
            let redis = try RedisConfiguration(url: configuration.redisURL)
            // A node of a cluster (possibly of one): it serves only the slots it wins.
            service = try CounterService(configuration: configuration.writePath, postgres: pool, redis: redis,
                                         ownership: OwnedSlots(), log: log)
        } catch {
            output.error("cannot start: \(error)")
            await pool.close()
            return .usage
        }
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
        let member = ClusterMember(configuration: configuration.membership(advertiseURL: configuration.advertiseURLSetting ?? ""),
                                   service: service, postgres: membershipPool, leasePostgres: leasePool, log: log)
        let server: HTTPServer
        var listening: HTTPServer?
        let users: UserAccess?
        do {
            users = configuration.users.isEnabled ? try UserAccess(configuration: configuration.users) : nil
        } catch {
            output.error("cannot start: \(error)")
            await pool.close()
            return .usage
        }
        let api = CounterAPI(service: service, tokens: configuration.tokens, postgres: pool, redis: adminRedis, member: member,
                             readyMaxLag: configuration.readyMaxLag, users: users)
        do {
            // Redis's shape first: a seed that is not a cluster, or a cluster with slots no master
            // serves, is a configuration error found before anything is written.
            // The identity provider's keys first too: a node that cannot check tokens would
            // turn every end user away.
            if let users, let source = users.keySetSource {
                let (keys, skipped) = try await source.load()
                users.verifier.replaceKeys(keys)
                log.log(.info, "user_token_keys", ["source": source.location, "kids": users.verifier.keyIDs.joined(separator: ","),
                                                   "skipped": skipped.joined(separator: "; ")])
            }
            try await service.redisTopology.discover()
            if service.redisTopology.isCluster {
                let masters = service.redisTopology.map.slotCounts.keys.sorted().map(\.description)
                log.log(.info, "redis_cluster", ["masters": masters.joined(separator: ",")])
            }
            if configuration.migrateOnStart {
                let report = try await SchemaMigrator.migrate(pool)
                log.log(.info, "migrated", ["applied": report.applied.map(String.init).joined(separator: ","),
                                            "version": String(report.currentVersion)])
            }
            if configuration.demoPosts > 0 {
                try await pool.query("INSERT INTO posts (id) SELECT generate_series(1, $1::bigint) ON CONFLICT DO NOTHING",
                                     [.int64(Int64(configuration.demoPosts))])
                log.log(.info, "demo_posts", ["ids": "1-\(configuration.demoPosts)"])
            }
            try await service.start()
            server = try HTTPServer(configuration: configuration.http, handler: api)
            // Bound first, so the advertised URL has the real port; requests that arrive before
            // the node has joined find no slot served and are answered 503 (retry).
            try server.start()
            listening = server
            try await member.join(advertising: configuration.advertiseURL(boundPort: server.port))
        } catch {
            output.error("cannot start: \(error)")
            if let listening { await listening.stop() }
            await service.shutdown(drain: false)
            await adminRedis.close()
            await membershipPool.close()
            await leasePool.close()
            await pool.close()
            if let error = error as? RedisError, error.code == .clusterConfiguration { return .usage }
            return .failure
        }

        // Signals: the first ends the group (the services stop, last started first); a second
        // ends the process at once.
        let impatient = Mutex<Task<Void, Never>?>(nil)
        let deadline = ShutdownDeadline()
        let waitForSignal: @Sendable () async -> Void = {
            var iterator = signals.stream.makeAsyncIterator()
            guard let first = await iterator.next() else { return }
            log.log(.info, "shutting_down", ["signal": first == SIGINT ? "SIGINT" : "SIGTERM",
                                             "timeout_s": String(configuration.shutdownTimeoutSeconds)])
            // Load balancers stop sending here while the slots are handed off.
            api.markShuttingDown()
            if let timeout = configuration.shutdownTimeout { deadline.start(timeout: timeout, service: service, log: log) }
            impatient.withLock {
                $0 = Task {
                    var rest = signals.stream.makeAsyncIterator()
                    if await rest.next() != nil {
                        log.log(.warn, "exiting_now", ["reason": "second signal"])
                        exit(130)
                    }
                }
            }
        }
        let announce = ListeningAnnouncement(server: server, configuration: configuration, log: log, output: output)
        var status = NodeCommand.ExitStatus.success
        do {
            // Stopping runs backwards: the membership hands the slots to the other nodes while
            // the HTTP server still answers (forwarding), then the server stops, then the write
            // path flushes what it still holds.
            var services: [any Service] = [service, server, member, announce]
            if let users, let source = users.keySetSource {
                services.append(KeySetRefresher(source: source, verifier: users.verifier, interval: configuration.users.keySetRefresh, log: log))
            }
            try await ServiceGroup.run(services, until: waitForSignal)
        } catch {
            output.error("cannot serve: \(error)")
            log.log(.error, "failed", ["error": "\(error)"])
            status = .failure
        }
        await adminRedis.close()
        await membershipPool.close()
        await leasePool.close()
        await pool.close()
        impatient.withLock { $0?.cancel() }
        deadline.cancel()
        if status == .success {
            if deadline.hasExpired {
                // What is left waits in the Redis logs; the next start (or the slots' next owner) flushes it.
                let left = ShutdownDeadline.summary(await service.pendingBySlot())
                log.log(.warn, "stopped", ["flushed": "false", "left_changes": left.changes, "left_slots": left.slotCount, "slots": left.slots])
            } else {
                log.log(.info, "stopped", ["flushed": "true"])
            }
        }
        return status
    }
}

/// Tells the operator where the node listens, once the HTTP server does (the last layer of the
/// group, so it runs only after the others started).
private struct ListeningAnnouncement: Service {
    let server: HTTPServer
    let configuration: NodeConfiguration
    let log: NodeLog
    let output: NodeCommand.Output

    func run() async throws {
        // The server listens once its `run()` has called `start()`; its port says so.
        while server.port == 0 {
            try await Task.sleep(for: .milliseconds(5))
        }
        let url = "http://\(configuration.http.host):\(server.port)"
        log.log(.info, "listening", ["url": url, "shards": String(configuration.writePath.shardCount),
                                     "ack": configuration.writePath.acknowledgement.rawValue])
        let auth = configuration.tokens.api == nil ? "" : " -H 'Authorization: Bearer $COUNTER_API_TOKEN'"
        output.standard("counter-node listening on \(url)")
        output.standard("try: curl -s -X POST\(auth) \(url)/v1/posts/1/likes/7/toggle")
        await waitUntilCancelled()
    }
}

/// Reads the end users' key set again every `interval`, so a rotated key is taken without a restart.
private struct KeySetRefresher: Service {
    let source: KeySetSource
    let verifier: TokenVerifier
    let interval: Duration
    let log: NodeLog

    func run() async throws {
        await source.refresh(verifier, every: interval, log: log)
    }
}

/// Delivers the given signals as an async stream instead of their default action.
// @unchecked Sendable: the signal sources are only kept alive here, never touched after init.
final class SignalStream: @unchecked Sendable {
    let stream: AsyncStream<Int32>
    private let sources: [any DispatchSourceSignal]

    init(signals: [Int32]) {
        var continuation: AsyncStream<Int32>.Continuation!
        stream = AsyncStream { continuation = $0 }
        let yield = continuation!
        sources = signals.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { yield.yield(number) }
            source.resume()
            return source
        }
    }
}
