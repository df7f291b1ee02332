import CounterCore
import Foundation
import NodeCluster
import NodeHTTP
import Persistence
import PostgresDriver
import UserTokens
import WritePath

/// The node's start steps that are not a long-running part of their own, each as a `Service`
/// of the node's group, so that a failure at any step stops, in reverse, what already started.

/// End users' key set: read at start (a node that cannot check tokens would turn every end user
/// away), then again every refresh interval, so a rotated key is taken without a restart.
struct UserKeySetService: Service {
    let source: KeySetSource
    let verifier: TokenVerifier
    let interval: Duration
    let log: NodeLog

    func run(_ lifecycle: ServiceLifecycle) async throws {
        let (keys, skipped) = try await source.load()
        verifier.replaceKeys(keys)
        log.log(
            .info, "user_token_keys",
            [
                "source": source.location, "kids": verifier.keyIDs.joined(separator: ","),
                "skipped": skipped.joined(separator: "; "),
            ])
        lifecycle.started()
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await source.refresh(verifier, every: interval, log: log) }
            await lifecycle.stopRequested()
            group.cancelAll()
        }
    }
}

/// The schema (`--migrate`), the reaction settings held against the data (a contradiction
/// stops the node before it serves), and the demo posts (`--demo-posts`), once Redis's shape is
/// known (the write path has started): nothing to stop.
struct SchemaPreparation: Service {
    let pool: PostgresPool
    let migrate: Bool
    let demoPosts: Int
    let reactions: ReactionModel
    let log: NodeLog

    func run(_ lifecycle: ServiceLifecycle) async throws {
        if migrate {
            let log = self.log
            let report = try await SchemaMigrator.migrate(pool, progress: { log.log(.info, "migrating", ["step": $0]) })
            log.log(
                .info, "migrated",
                [
                    "applied": report.applied.map(String.init).joined(separator: ","),
                    "version": String(report.currentVersion),
                ])
        }
        let contradictions = try await ReactionDataCheck.contradictions(of: reactions, pool: pool)
        if !contradictions.isEmpty { throw ReactionDataCheck.Contradiction(problems: contradictions) }
        if demoPosts > 0 {
            try await pool.query(
                "INSERT INTO posts (id) SELECT generate_series(1, $1::bigint) ON CONFLICT DO NOTHING",
                [.int64(Int64(demoPosts))])
            log.log(.info, "demo_posts", ["ids": "1-\(demoPosts)"])
        }
        lifecycle.started()
        await lifecycle.stopRequested()
    }
}

/// The node's membership of its cluster, advertising the port the HTTP server (started before
/// it) is bound to. It has started once its first round has claimed and drained its slots;
/// asked to stop, it hands them to the other nodes while the HTTP server still forwards.
struct MembershipService: Service {
    let member: ClusterMember
    let server: HTTPServer
    let configuration: NodeConfiguration

    func run(_ lifecycle: ServiceLifecycle) async throws {
        try await member.run(lifecycle, advertising: configuration.advertiseURL(boundPort: server.port))
    }
}

/// Tells the operator where the node listens, once everything before it has started.
struct ListeningAnnouncement: Service {
    let server: HTTPServer
    let configuration: NodeConfiguration
    let log: NodeLog
    let output: NodeCommand.Output

    func run(_ lifecycle: ServiceLifecycle) async throws {
        let url = "http://\(configuration.http.host):\(server.port)"
        let tlsURL = configuration.http.tls.flatMap { tls in server.tlsPort.map { "https://\(tls.host):\($0)" } }
        log.log(
            .info, "listening",
            [
                "url": url, "tls_url": tlsURL ?? "none", "shards": String(configuration.writePath.shardCount),
                "ack": configuration.writePath.acknowledgement.rawValue,
            ])
        let auth = configuration.tokens.api == nil ? "" : " -H 'Authorization: Bearer $COUNTER_API_TOKEN'"
        output.standard("counter-node listening on \(url)" + (tlsURL.map { " and \($0)" } ?? ""))
        output.standard("try: curl -s -X POST\(auth) \(url)/v1/posts/1/likes/7/toggle")
        lifecycle.started()
        await lifecycle.stopRequested()
    }
}

/// A service of the node under its name: it logs (at debug level) when it has started and when
/// it has stopped, so the order of a start and of a stop can be seen.
struct NamedService: Service {
    let name: String
    let service: any Service
    let log: NodeLog

    func run(_ lifecycle: ServiceLifecycle) async throws {
        let inner = ServiceLifecycle { [log, name] in
            log.log(.debug, "service_started", ["service": name])
            lifecycle.started()
        }
        // The outer request to stop reaches the inner service.
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                await lifecycle.stopRequested()
                inner.requestStop()
            }
            do {
                try await service.run(inner)
                log.log(.debug, "service_stopped", ["service": name])
            } catch {
                log.log(.debug, "service_stopped", ["service": name, "error": "\(error)"])
                group.cancelAll()
                throw error
            }
            group.cancelAll()
        }
    }
}
