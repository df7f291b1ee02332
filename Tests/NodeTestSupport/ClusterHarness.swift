import CounterWire
import Foundation
import Persistence
import PostgresDriver
import ShardRouter
import Synchronization
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Several `counter-node serve` processes of one cluster (one key prefix) on the test PostgreSQL
/// and Redis, each with a node id of its own, and the checks a cluster must pass afterwards.
/// Every flush records the entries it applies in an audit table with a unique key, so an entry
/// applied twice fails its flush: the nodes are `AuditedNode` processes, `counter-node serve`
/// with the audit (`AuditTable`).
package final class ClusterHarness: Sendable {
    /// One node process.
    package struct Node: Sendable {
        package let id: String
        package let port: Int
        package let process: ChildProcess
        package var url: String { "http://127.0.0.1:\(port)" }
    }

    package let prefix: String
    package let audit: AuditTable
    package let redisURL: String
    /// The database the nodes serve (the test database, or the reactions' one).
    package let postgresURL: String
    package let pool: PostgresPool
    private let started = Mutex<[Node]>([])

    private init(prefix: String, audit: AuditTable, redisURL: String, postgresURL: String, pool: PostgresPool) {
        self.prefix = prefix
        self.audit = audit
        self.redisURL = redisURL
        self.postgresURL = postgresURL
        self.pool = pool
    }

    /// Runs `body` with a fresh harness, then stops every node it started (also when `body`
    /// throws): a node left running would keep the test process's output open.
    /// - Parameter postgresURL: the database the nodes serve; `nil`: the test database.
    package static func with<T>(
        _ label: String, redis: RedisTarget = .single, postgresURL: String? = nil, _ body: (ClusterHarness) async throws -> T
    ) async throws -> T {
        let harness = try await make(label, redis: redis, postgresURL: postgresURL)
        do {
            let result = try await body(harness)
            await harness.tearDown()
            return result
        } catch {
            await harness.tearDown()
            throw error
        }
    }

    package static func make(_ label: String, redis: RedisTarget = .single, postgresURL: String? = nil) async throws -> ClusterHarness {
        let pool: PostgresPool
        if let postgresURL {
            pool = PostgresPool(configuration: PostgresConfiguration(url: postgresURL))
            _ = try await SchemaMigrator.migrate(pool)
        } else {
            pool = try await TestEnvironment.migratedPool()
        }
        let prefix = TestEnvironment.uniqueKeyPrefix(label).replacingOccurrences(of: ":", with: "-")
        let audit = try await AuditTable.create(prefix, in: pool)
        return ClusterHarness(
            prefix: prefix, audit: audit, redisURL: redis.url, postgresURL: postgresURL ?? TestEnvironment.postgresURL, pool: pool)
    }

    /// Starts node `id` and returns once it listens (it has joined and serves its slots).
    /// - Parameter collectingErrors: the node's log and errors are collected with its output
    ///   (for a test that reads them) instead of going to the test's standard error.
    /// - Parameter leaseMilliseconds: `--lease` in milliseconds; `nil`: the node's default.
    package func start(_ id: String, leaseMilliseconds: Int? = nil, extra: [String] = [], collectingErrors: Bool = false) async throws -> Node {
        let port = try PrivateServers.freePort()
        let process = try ChildProcess(
            [
                ChildProcess.builtProduct("AuditedNode"), "serve",
                "--listen", "127.0.0.1:\(port)", "--postgres-url", postgresURL,
                "--redis-url", redisURL, "--key-prefix", prefix, "--node-id", id,
                "--audit-table", audit.name, "--shards", "2", "--log-level", "info",
            ]
                + (leaseMilliseconds.map { ["--lease", "\($0)ms"] } ?? []) + extra,
            mergingStandardError: collectingErrors)
        let node = Node(id: id, port: port, process: process)
        started.withLock { $0.append(node) }
        guard try await process.waitUntilListening() else {
            throw HarnessError("node \(id) did not start: \(process.lastLines)")
        }
        return node
    }

    /// The slot map as `node` knows it.
    package func map(via node: Node) async throws -> ClusterMapBody {
        let (data, _) = try await ClusterHTTP.control.data(from: URL(string: "\(node.url)/v1/cluster")!)
        return try JSONDecoder().decode(ClusterMapBody.self, from: data)
    }

    /// Waits until `condition` holds for `node`'s map (read every 100 ms), up to `timeout`.
    package func waitForMap(via node: Node, timeout: Duration = .seconds(30), _ condition: (ClusterMapBody) -> Bool) async throws -> ClusterMapBody {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let map = try? await map(via: node), condition(map) { return map }
            guard ContinuousClock.now < deadline else { throw HarnessError("the map did not settle within \(timeout)") }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// `/metrics` of `node`, as name → value for the unlabelled families.
    package func metrics(of node: Node) async throws -> [String: Double] {
        let (data, _) = try await ClusterHTTP.control.data(from: URL(string: "\(node.url)/metrics")!)
        var values: [String: Double] = [:]
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") where !line.hasPrefix("#") && !line.contains("{") {
            let parts = line.split(separator: " ")
            if parts.count == 2, let value = Double(parts[1]) { values[String(parts[0])] = value }
        }
        return values
    }

    /// Flushes every node in `nodes` (each flushes the slots it owns).
    package func flush(_ nodes: [Node]) async throws {
        for node in nodes {
            var request = URLRequest(url: URL(string: "\(node.url)/admin/flush")!)
            request.httpMethod = "POST"
            request.timeoutInterval = 60
            let (data, response) = try await ClusterHTTP.control.data(for: request)
            guard (response as? HTTPURLResponse)?.statusCode == 200 else {
                throw HarnessError("flush of \(node.id) answered \(String(decoding: data, as: UTF8.self))")
            }
        }
    }

    /// PostgreSQL against what the load acknowledged last: nothing lost, nothing phantom, every
    /// count equal to its rows, and (by the audit table's key) no entry applied twice.
    package func verify(_ load: HTTPPairLoad) async throws {
        let rows = try await pool.query("SELECT user_id, post_id FROM likes WHERE post_id = ANY($1::bigint[])", [.int64Array(load.posts)])
        let members = Set(try rows.map { Pair(user: try $0.int64(0), post: try $0.int64(1)) })
        let (lost, phantom, undetermined) = load.audit(rows: members)
        #expect(
            lost.isEmpty,
            "acknowledged likes missing from PostgreSQL: \(lost.prefix(5)); their unacknowledged requests: \(lost.prefix(5).map { load.failureHistory(of: $0) })"
        )
        #expect(phantom.isEmpty, "likes in PostgreSQL that were not acknowledged last: \(phantom.prefix(5))")
        #expect(undetermined == 0, "every pair's state is settled before the check")
        let drift = try await pool.query(
            """
            SELECT p.id, p.likes_count, count(l.id) FROM posts p LEFT JOIN likes l ON l.post_id = p.id
            WHERE p.id = ANY($1::bigint[]) GROUP BY p.id HAVING p.likes_count <> count(l.id)
            """, [.int64Array(load.posts)])
        #expect(drift.count == 0, "posts whose likes_count differs from their rows: \(drift.count)")
        let audited = try await pool.query("SELECT count(*) FROM \(audit.name)")
        #expect(try audited.first?.int64(0) ?? 0 > 0, "the flushes recorded what they applied")
    }

    /// Stops every node still running (SIGKILL) and drops the audit table.
    package func tearDown() async {
        for node in started.withLock({ $0 }) {
            node.process.kill(SIGKILL)
            _ = try? await node.process.waitForExit(timeout: .seconds(10))
        }
        _ = try? await pool.query("DROP TABLE IF EXISTS \(audit.name)")
        await pool.close()
    }
}

package struct HarnessError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

package enum ClusterHTTP {
    /// The load's session.
    package static let session = make()
    /// The checks' own session (maps, metrics, flushes), so they never wait behind the load's
    /// requests to a paused node.
    package static let control = make()

    private static func make() -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = 32
        configuration.timeoutIntervalForRequest = 5
        return URLSession(configuration: configuration)
    }
}

/// Likes, unlikes and toggles over HTTP from concurrent workers to random nodes of a cluster,
/// each worker owning its users so a pair never has two operations in flight; remembers every
/// pair's last acknowledged state (`PairLoad`'s rules). `settle` then gives every pair whose
/// last operation failed a like that is answered, so each pair's state is known.
package final class HTTPPairLoad: Sendable {
    package let posts: [Int64]
    /// `unanswered`: pairs with a request that got no answer (status 0). Such a request may still be applied
    /// later (a node paused with it read waits, then acts on it after it resumes), so the load
    /// sends nothing more for the pair: a later answer would not be its final state. `settle`
    /// decides them once every node runs again and no node can still hold the request
    /// (`requestHoldLimit` after it went unanswered).
    private let state = Mutex<
        (
            expected: [Pair: PairLoad.Expected], stop: Bool, acknowledged: Int, failed: Int, statuses: [String: Int],
            unanswered: [Pair: ContinuousClock.Instant]
        )
    >(([:], false, 0, 0, [:], [:]))
    /// How long after a request went unanswered a node may still act on it: a request whose
    /// client timed out (5 s) may be parked on a moving slot for the node's slot-move wait (5 s)
    /// at the node it reached and again at the owner it is forwarded to. Seen in CI: a DELETE
    /// timed out, `settle` acknowledged a like of its pair, and the DELETE landed after it.
    static let requestHoldLimit = Duration.seconds(12)
    private let nodes = Mutex<[String]>([])
    /// Per pair, its requests that were not acknowledged (method, node, status, when), so a
    /// failed check can say what happened to the pairs it names.
    private let failures = Mutex<[Pair: [String]]>([:])

    package init(posts: [Int64]) {
        self.posts = posts
    }

    /// The node URLs requests go to (changed as nodes come and go).
    package func setNodes(_ urls: [String]) { nodes.withLock { $0 = urls } }

    package var acknowledged: Int { state.withLock { $0.acknowledged } }
    package var failed: Int { state.withLock { $0.failed } }
    /// Answers by status and error code (`200`, `503 slot_moving`, `0` for no answer).
    package var statuses: [String: Int] { state.withLock { $0.statuses } }

    package func run(workers: Int, usersPerWorker: Int = 20) async {
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<workers {
                group.addTask {
                    while !self.state.withLock({ $0.stop }) {
                        let user = Int64(worker * usersPerWorker + Int.random(in: 1...usersPerWorker))
                        let post = self.posts.randomElement()!
                        let method = ["toggle", "PUT", "DELETE", "toggle"].randomElement()!
                        let pair = Pair(user: user, post: post)
                        if !self.state.withLock({ $0.unanswered[pair] != nil }) { await self.send(method, pair) }
                        try? await Task.sleep(for: .milliseconds(20))
                    }
                }
            }
        }
    }

    package func stop() { state.withLock { $0.stop = true } }

    /// Waits until `count` more operations than `since` were acknowledged — the load has run
    /// that far, however slow the machine — or throws after `timeout`.
    package func waitForAcknowledged(_ count: Int, since: Int = 0, timeout: Duration = .seconds(60)) async throws {
        let deadline = ContinuousClock.now + timeout
        while acknowledged < since + count {
            guard ContinuousClock.now < deadline else {
                throw HarnessError("the load acknowledged \(acknowledged - since) operations of \(count) within \(timeout) (\(statuses))")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Sends `method` for `pair` to `node` (default: a random one) and records the outcome.
    @discardableResult
    /// Sends a like of `pair` to the node on `port` over a plain socket of its own (a probe that
    /// waits behind nothing of the test's own), and records the outcome.
    package func probe(_ pair: Pair, port: Int) async -> Bool {
        let request = RawHTTPClient.request("PUT", "/v1/posts/\(pair.post)/likes/\(pair.user)")
        guard let answer = try? await RawHTTPClient.exchange(port: port, chunks: [request], responses: 1, timeout: .seconds(6)).first else {
            record(pair, .either, status: 0)
            return false
        }
        if answer.status == 200, let state = try? JSONDecoder().decode(LikeStatus.self, from: Data(answer.body)) {
            record(pair, .liked(state.isLiked), status: 200)
            return true
        }
        if state.withLock({ $0.statuses["\(answer.status) (probe)", default: 0] < 5 }) {
            print("cluster-test: probe answer \(answer.status) at \(Date()): \(answer.text)")
        }
        record(pair, .either, status: answer.status, code: " (probe)")
        return false
    }

    @discardableResult
    package func send(_ method: String, _ pair: Pair, via node: String? = nil) async -> Bool {
        guard let base = node ?? nodes.withLock({ $0.randomElement() }) else { return false }
        let path = method == "toggle" ? "/v1/posts/\(pair.post)/likes/\(pair.user)/toggle" : "/v1/posts/\(pair.post)/likes/\(pair.user)"
        var request = URLRequest(url: URL(string: base + path)!)
        request.httpMethod = method == "toggle" ? "POST" : method
        do {
            let (data, response) = try await ClusterHTTP.session.data(for: request)
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            if status == 200, let answer = try? JSONDecoder().decode(LikeStatus.self, from: data) {
                record(pair, .liked(answer.isLiked), status: 200)
                return true
            }
            let body = try? JSONDecoder().decode(ErrorBody.self, from: data)
            let code = body.map { " " + $0.error.code } ?? ""
            if let body, state.withLock({ $0.statuses["\(status)\(code)", default: 0] < 3 }) {
                print("cluster-test: load answer \(status) \(body.error.code): \(body.error.message)")
            }
            record(pair, .either, status: status, code: code)
            noteFailure(pair, "\(method) via \(base): \(status)\(code)")
        } catch {
            record(pair, .either, status: 0)
            noteFailure(pair, "\(method) via \(base): no answer (\(error))")
        }
        return false
    }

    private func noteFailure(_ pair: Pair, _ what: String) {
        let at = Date().formatted(.iso8601.time(includingFractionalSeconds: true))
        failures.withLock { $0[pair, default: []].append("\(at) \(what)") }
    }

    /// The requests of `pair` that were not acknowledged, in order.
    package func failureHistory(of pair: Pair) -> [String] {
        failures.withLock { $0[pair] ?? [] }
    }

    private func record(_ pair: Pair, _ expected: PairLoad.Expected, status: Int, code: String = "") {
        state.withLock { state in
            state.expected[pair] = expected
            if status == 0 { state.unanswered[pair] = .now }
            state.statuses["\(status)\(code)", default: 0] += 1
            if status == 200 { state.acknowledged += 1 } else { state.failed += 1 }
        }
    }

    /// Likes every pair whose outcome is unknown until a node answers (at most `timeout`); a pair
    /// whose request went unanswered only once `requestHoldLimit` has passed since.
    package func settle(timeout: Duration = .seconds(30)) async throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            let (open, held) = state.withLock { state -> ([Pair], Int) in
                let open = state.expected.filter { $0.value == .either }.map(\.key)
                let free = open.filter { pair in state.unanswered[pair].map { .now - $0 >= Self.requestHoldLimit } ?? true }
                return (free, open.count - free.count)
            }
            if open.isEmpty && held == 0 { return }
            guard ContinuousClock.now < deadline else { throw HarnessError("\(open.count + held) pairs still unsettled") }
            for pair in open { await send("PUT", pair) }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// As `PairLoad.audit`.
    package func audit(rows members: Set<Pair>) -> (lost: [Pair], phantom: [Pair], undetermined: Int) {
        PairLoad.audit(expected: state.withLock { $0.expected }, rows: members)
    }
}
