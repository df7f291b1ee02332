import BenchKit
import CounterCore
import CounterWire
import Foundation
import Persistence

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
/// come in id order with no gap and that their number is the toggles acknowledged (each toggle
/// on its own pair changes one row).
struct EventsBench {
    let options: EventsBenchOptions

    func run() async throws {
        let node = options.node
        let start = try page(after: 0, limit: 1, wait: 0).newestID
        let post = Int64.random(in: 1_000_000_000...4_000_000_000_000_000)
        let pool = PostgresPool(configuration: PostgresConfiguration(url: options.servers.postgresURL))
        try await pool.query("INSERT INTO posts (id) VALUES ($1)", [.int64(post)])
        print("counter-bench events: hot toggles at \(options.load.connections) connections for \(Int(options.load.duration.inSeconds)) s, "
              + "one consumer long-polling from event \(start)")
        do {
            try await measure(post: post, from: start)
        } catch {
            _ = try? await pool.query("DELETE FROM posts WHERE id = $1", [.int64(post)])
            await pool.close()
            throw error
        }
        _ = try? await pool.query("DELETE FROM posts WHERE id = $1", [.int64(post)])
        await pool.close()
    }

    private func measure(post: Int64, from start: Int64) async throws {
        let node = options.node
        do {
            let consumer = Task.detached { [options] () -> (LatencyHistogram, Int64, Int) in
                var delays = LatencyHistogram()
                var after = start
                var read = 0
                let end = ContinuousClock.now + options.load.duration + .seconds(2)
                while ContinuousClock.now < end {
                    let page = try self.page(after: after, limit: options.pageSize, wait: 1)
                    let received = Int64(Date().timeIntervalSince1970 * 1_000)
                    for event in page.events {
                        if let committed = LikeTime.milliseconds(event.committedAt) { delays.record(UInt64(max(0, received - committed)) * 1_000) }
                    }
                    read += page.events.count
                    after = page.nextAfter
                }
                return (delays, after, read)
            }
            let hot = ScenarioWorkload(scenario: .hot, operation: .toggle, posts: [post], zipfExponent: 0.99, readRatio: 0,
                                       token: node.apiToken, userBase: Int64.random(in: 1...1_000_000) * 1_000_000_000)
            let result = await LoadGenerator(options: options.load, workload: hot).run { _, _, _, _ in }
            try node.flush()
            let (delays, _, liveRead) = try await consumer.value
            print(String(format: "  hot: %.0f toggles/s, %d acknowledged, failures %d", result.throughput, result.successes, result.failures))
            print(String(format: "  long poll: %d events seen live; commit to consumer p50 %.0f ms, p99 %.0f ms, max %.0f ms",
                         liveRead, Double(delays.percentile(0.5)) / 1_000, Double(delays.percentile(0.99)) / 1_000, Double(delays.maximum) / 1_000))
            // Every event of the run, read again from the start: in order, no gap.
            let readStarted = ContinuousClock.now
            var after = start
            var expectedID = start + 1
            var count = 0
            var toggledPairs = 0
            while true {
                let page = try page(after: after, limit: options.pageSize, wait: 0)
                if page.events.isEmpty { break }
                for event in page.events {
                    guard event.id == expectedID else {
                        throw BenchCheckFailure(message: "event \(event.id) came where \(expectedID) was due: a gap or a disorder")
                    }
                    expectedID += 1
                    if event.postID == post { toggledPairs += 1 }
                }
                count += page.events.count
                after = page.nextAfter
            }
            let seconds = (ContinuousClock.now - readStarted).inSeconds
            print(String(format: "  read back: %d events in id order with no gap in %.1f s (%.0f events/s); %d of them this run's post's",
                         count, seconds, Double(count) / max(seconds, 0.001), toggledPairs))
            // Each user of hot toggles its own pair once a round: every acknowledged toggle is one
            // change of a row, so one event, unless two of a pair's toggles met in one flush.
            guard toggledPairs <= result.successes else {
                throw BenchCheckFailure(message: "\(toggledPairs) events for \(result.successes) acknowledged toggles")
            }
        }
    }

    private func page(after: Int64, limit: Int, wait: Int) throws -> EventsPage {
        let node = options.node
        let (status, body) = try OneShotHTTP.send(to: node.endpoint, method: "GET", path: "/v1/events?after=\(after)&limit=\(limit)&wait=\(wait)",
                                                  token: node.adminToken, timeoutSeconds: wait + 30)
        guard status == 200 else { throw BenchCheckFailure(message: "GET /v1/events answered \(status): \(body.prefix(300))") }
        return try JSONDecoder().decode(EventsPage.self, from: Data(body.utf8))
    }
}
