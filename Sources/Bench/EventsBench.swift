import BenchKit
import CounterCore
import CounterWire
import Foundation
import PostgresDriver

/// Options of `counter-bench events`.
struct EventsBenchOptions {
    var load = LoadOptions()
    var node: NodeTarget
    var servers: BenchServers
    var pageSize = 1_000

    init(arguments: [String], environment: [String: String]) throws {
        servers = BenchServers(environment: environment)
        node = NodeTarget(environment: environment)
        load.connections = 64
        load.warmup = .zero
        load.duration = .seconds(10)
        var reader = BenchArguments(arguments)
        try reader.forEachFlag { flag, reader in
            switch flag {
            case "--connections": load.connections = try reader.number(flag, 1...20_000)
            case "--duration": load.duration = .seconds(try reader.number(flag, 1...3_600))
            case "--page-size": pageSize = try reader.number(flag, 1...1_000)
            case "--rate": load.rate = Double(try reader.number(flag, 1...1_000_000))
            default: return try node.take(flag, from: &reader) || servers.take(flag, from: &reader)
            }
            return true
        }
        load.endpoints = [node.endpoint]
    }
}

/// `counter-bench events`: `hot` toggles at `--connections` for `--duration` on a node with
/// `--events true`, while one consumer long-polls `GET /v1/events` (`--page-size` a page, the
/// admin token) from the newest event on. Prints how long after its commit each event reached the
/// consumer (`committed_at` to the answer, p50/p99/max: both clocks are this machine's), then,
/// after the flush, reads every event the run made from the start, in pages, and checks that they
/// come in id order with no gap, and that the post's events, user by user, lead to its count.
/// With `--rate R`, the toggles come in open loop, R a second: the consumer then keeps up, and the
/// delay is the long poll's (closed loop measures a consumer that cannot keep up).
struct EventsBench {
    let options: EventsBenchOptions

    func run() async throws {
        let start = try page(after: 0, limit: 1, wait: 0).newestID
        let post = Int64.random(in: 1_000_000_000...4_000_000_000_000_000)
        let pool = PostgresPool(configuration: PostgresConfiguration(url: options.servers.postgresURL))
        try await pool.query("INSERT INTO posts (id) VALUES ($1)", [.int64(post)])
        print(
            "counter-bench events: hot toggles at \(options.load.connections) connections for \(Int(options.load.duration.inSeconds)) s, "
                + "one consumer long-polling from event \(start)")
        var failure: Error?
        do {
            try await followLive(post: post, from: start)
            try readBack(post: post, from: start)
        } catch {
            failure = error
        }
        _ = try? await pool.query("DELETE FROM posts WHERE id = $1", [.int64(post)])
        await pool.close()
        if let failure { throw failure }
    }

    /// Hot toggles on `post` while one consumer long-polls from `start`: how long after its
    /// commit each event reached the consumer.
    private func followLive(post: Int64, from start: Int64) async throws {
        let node = options.node
        let consumer = Task.detached { [options] () -> (LatencyHistogram, Int) in
            var delays = LatencyHistogram()
            var after = start
            var read = 0
            let end = ContinuousClock.now + options.load.duration + .seconds(2)
            while ContinuousClock.now < end {
                let (page, received) = try self.timedPage(after: after, limit: options.pageSize, wait: 1)
                for event in page.events {
                    if let committed = LikeTime.milliseconds(event.committedAt) { delays.record(UInt64(max(0, received - committed)) * 1_000) }
                }
                read += page.events.count
                after = page.nextAfter
            }
            return (delays, read)
        }
        let hot = ScenarioWorkload(
            scenario: .hot, operation: .toggle, posts: [post], zipfExponent: 0.99, readRatio: 0,
            token: node.apiToken, userBase: Int64.random(in: 1...1_000_000) * 1_000_000_000)
        let result = await LoadGenerator(options: options.load, workload: hot).run { _, _, _, _ in }
        try node.flush()
        let (delays, liveRead) = try await consumer.value
        print(String(format: "  hot: %.0f toggles/s, %d acknowledged, failures %d", result.throughput, result.successes, result.failures))
        print(
            String(
                format: "  long poll: %d events seen live; commit to consumer p50 %.0f ms, p99 %.0f ms, max %.0f ms",
                liveRead, Double(delays.percentile(0.5)) / 1_000, Double(delays.percentile(0.99)) / 1_000, Double(delays.maximum) / 1_000))
    }

    /// Every event after `start`, read again in pages: in id order with no gap, and `post`'s
    /// events, user by user, alternate from a like and leave exactly its count liking it.
    private func readBack(post: Int64, from start: Int64) throws {
        let node = options.node
        let readStarted = ContinuousClock.now
        var after = start
        var count = 0
        var ofThisPost = 0
        var liked: Set<Int64> = []
        var repeated = 0
        while true {
            let page = try page(after: after, limit: options.pageSize, wait: 0)
            if page.events.isEmpty { break }
            for event in page.events {
                guard event.id == after + 1 else {
                    throw BenchCheckFailure(message: "event \(event.id) came where \(after + 1) was due: a gap or a disorder")
                }
                after = event.id
                guard event.postID == post else { continue }
                ofThisPost += 1
                if liked.contains(event.userID) == event.liked { repeated += 1 }
                if event.liked { liked.insert(event.userID) } else { liked.remove(event.userID) }
            }
            count += page.events.count
        }
        let seconds = (ContinuousClock.now - readStarted).inSeconds
        print(
            String(
                format: "  read back: %d events in id order with no gap in %.1f s (%.0f events/s); %d of them this run's post's",
                count, seconds, Double(count) / max(seconds, 0.001), ofThisPost))
        let (_, countBody) = try OneShotHTTP.send(to: node.endpoint, method: "GET", path: "/v1/posts/\(post)", token: node.apiToken)
        guard let likesCount = try? JSONDecoder().decode(PostCount.self, from: Data(countBody.utf8)).likesCount else {
            throw BenchCheckFailure(message: "GET /v1/posts/\(post) answered \(countBody.prefix(200))")
        }
        guard repeated == 0, Int64(liked.count) == likesCount else {
            throw BenchCheckFailure(
                message:
                    "the events say \(liked.count) users like post \(post) (\(repeated) events repeat the one before), its count is \(likesCount)")
        }
        print("  check: every user's events alternate from a like, and the \(liked.count) users they leave liking the post are its count: PASSED")
    }

    private func page(after: Int64, limit: Int, wait: Int) throws -> EventsPage {
        try timedPage(after: after, limit: limit, wait: wait).0
    }

    /// A page, and when its answer had arrived (Unix milliseconds, before it is decoded: what the
    /// consumer does with it after is its own time).
    private func timedPage(after: Int64, limit: Int, wait: Int) throws -> (EventsPage, Int64) {
        let node = options.node
        let (status, body) = try OneShotHTTP.send(
            to: node.endpoint, method: "GET", path: "/v1/events?after=\(after)&limit=\(limit)&wait=\(wait)",
            token: node.adminToken, timeoutSeconds: wait + 30)
        let received = Int64(Date().timeIntervalSince1970 * 1_000)
        guard status == 200 else { throw BenchCheckFailure(message: "GET /v1/events answered \(status): \(body.prefix(300))") }
        return (try JSONDecoder().decode(EventsPage.self, from: Data(body.utf8)), received)
    }
}
