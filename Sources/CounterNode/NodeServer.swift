import Dispatch
import CounterCore
import Foundation
import Persistence
import WritePath
import NodeHTTP
import NodeAPI

/// `counter-node serve`: migrates, starts the write path and the HTTP API, and runs until
/// SIGTERM or SIGINT. The first signal stops accepting, answers what is in flight, flushes
/// everything to PostgreSQL and exits 0; a second signal exits at once.
public enum NodeServer {
    public static func run(_ configuration: NodeConfiguration, output: NodeCommand.Output) async -> NodeCommand.ExitStatus {
        if let refusal = configuration.servingRefusal {
            output.error(refusal)
            return .usage
        }
        let log = NodeLog(minimum: configuration.logLevel)
        // Signals are taken before anything starts, so none is missed.
        let signals = SignalStream(signals: [SIGTERM, SIGINT])

        let pool = PostgresPool(configuration: configuration.postgres)
        let service: CounterService
        do {
            let redis = try RedisConfiguration(url: configuration.redisURL)
            service = try CounterService(configuration: configuration.writePath, postgres: pool, redis: redis)
        } catch {
            output.error("cannot start: \(error)")
            await pool.close()
            return .usage
        }
        let adminRedis = RedisClient(topology: service.redisTopology)
        let server: HTTPServer
        do {
            // Redis's shape first: a seed that is not a cluster, or a cluster with slots no master
            // serves, is a configuration error found before anything is written.
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
            let api = CounterAPI(service: service, tokens: configuration.tokens, postgres: pool, redis: adminRedis)
            server = try HTTPServer(configuration: configuration.http, handler: api)
            try server.start()
        } catch {
            output.error("cannot start: \(error)")
            await service.shutdown(drain: false)
            await adminRedis.close()
            await pool.close()
            if let error = error as? RedisError, error.code == .clusterConfiguration { return .usage }
            return .failure
        }

        let url = "http://\(configuration.http.host):\(server.port)"
        log.log(.info, "listening", ["url": url, "shards": String(configuration.writePath.shardCount),
                                     "ack": configuration.writePath.acknowledgement.rawValue])
        let auth = configuration.tokens.api == nil ? "" : " -H 'Authorization: Bearer $COUNTER_API_TOKEN'"
        output.standard("counter-node listening on \(url)")
        output.standard("try: curl -s -X POST\(auth) \(url)/v1/posts/1/likes/7/toggle")

        var iterator = signals.stream.makeAsyncIterator()
        let first = await iterator.next() ?? SIGTERM
        log.log(.info, "shutting_down", ["signal": first == SIGINT ? "SIGINT" : "SIGTERM"])
        // A second signal ends the process at once.
        let impatient = Task {
            var rest = iterator
            if await rest.next() != nil {
                log.log(.warn, "exiting_now", ["reason": "second signal"])
                exit(130)
            }
        }
        await server.stop()
        await service.shutdown(drain: true)
        await adminRedis.close()
        await pool.close()
        impatient.cancel()
        log.log(.info, "stopped", ["flushed": "true"])
        return .success
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
