import CounterCore
import Foundation
import Synchronization

/// One request a workload wants sent, and what it means for the correctness check.
public struct PlannedRequest: Sendable {
    public let bytes: [UInt8]
    /// For writes: the pair it changes (each pair belongs to one connection, so at most one
    /// request per pair is ever in flight).
    public let pair: CorrectnessCheck.Pair?
    /// Which of `LoadOptions.endpoints` to send it to.
    public let endpoint: Int

    public init(bytes: [UInt8], pair: CorrectnessCheck.Pair? = nil, endpoint: Int = 0) {
        self.bytes = bytes
        self.pair = pair
        self.endpoint = endpoint
    }
}

/// Makes the requests of one scenario. Called from the generator's threads: each connection
/// index is only ever used by one thread, one request at a time.
public protocol Workload: Sendable {
    func request(connection: Int, sequence: Int, random: inout SystemRandomNumberGenerator) -> PlannedRequest
}

/// How to drive the load.
public struct LoadOptions: Sendable {
    /// Where requests go: one node, or (slot-aware) every node of a cluster. Each connection
    /// opens a socket to an endpoint when it first sends there and keeps it open; it still has at
    /// most one request in flight.
    public var endpoints = [Endpoint(host: "127.0.0.1", port: 8080)]
    public var connections = 64
    /// Event-loop threads; each owns a share of the connections. Defaults to 1.
    public var threads = 1
    public var duration: Duration = .seconds(10)
    /// Responses that complete during the warm-up are not counted (their pairs still are).
    public var warmup: Duration = .seconds(2)
    /// Open loop: requests per second in all, sent on schedule whether or not answers came
    /// back (latency counts from the scheduled time, so queueing is measured). `nil`: closed
    /// loop, each connection sends its next request when the previous one is answered.
    public var rate: Double? = nil
    /// A request unanswered this long counts as a timeout; its connection is reopened.
    public var timeout: Duration = .seconds(5)
    /// What the connections speak: HTTP/1.1 to nodes, or RESP to a Redis server. A RESP reply
    /// counts as status 200, an error reply as 500.
    public var wire: WireProtocol = .http

    public init() {}
}

/// What a run measured.
public struct LoadResult: Sendable {
    public var histogram = LatencyHistogram()
    /// Answers by status code (after the warm-up).
    public var statuses: [Int: Int] = [:]
    /// Failures without an answer: "timeout", "connection closed", "connect failed".
    public var errors: [String: Int] = [:]
    /// Successful answers per second of the measured part, for charts.
    public var throughputTimeline: [Int] = []
    /// p99 in microseconds per second of the measured part.
    public var p99Timeline: [UInt64] = []
    /// Failures (error answers and requests without one) per second of the measured part.
    public var failureTimeline: [Int] = []
    public var measuredSeconds: Double = 0
    /// The final known state of every pair written (by its last answer: each pair is written by
    /// one connection at a time).
    public var expectations: [CorrectnessCheck.Pair: CorrectnessCheck.Expectation] = [:]
    /// Every pair's toggles that succeeded, and whether any may have changed it unseen: the
    /// check by parity, for runs where several connections toggle the same pair at once.
    public var toggles: [CorrectnessCheck.Pair: CorrectnessCheck.ToggleTally] = [:]
    /// Answers of reaction routes that listed several kinds as the user's (`mine`).
    public var severalKindsAnswers = 0

    public var successes: Int { statuses.filter { (200..<300).contains($0.key) }.values.reduce(0, +) }
    public var failures: Int { statuses.filter { !(200..<300).contains($0.key) }.values.reduce(0, +) + errors.values.reduce(0, +) }
    public var throughput: Double { measuredSeconds > 0 ? Double(successes) / measuredSeconds : 0 }
    /// The answers by status, `200: 9812, 503: 4` (empty when there were none).
    public var statusesText: String { statuses.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ") }
    /// The requests without an answer, by why, `timeout: 3` (empty when there were none).
    public var errorsText: String { errors.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ") }
}

/// A load generator over many keep-alive connections (HTTP/1.1, HTTP/2 or RESP) driven by a few
/// event-loop threads (epoll), not a thread or task per connection.
public final class LoadGenerator: Sendable {
    public let options: LoadOptions
    let workload: any Workload
    private let shared = Mutex(LoadResult())
    private let secondHistogram = Mutex(LatencyHistogram())
    private let secondCount = Atomic<Int>(0)

    public init(options: LoadOptions, workload: any Workload) {
        self.options = options
        self.workload = workload
    }

    /// Runs the load; calls `progress` once a second with (elapsed seconds, answers/s in that
    /// second, failures so far, p99 so far in µs).
    public func run(progress: @escaping @Sendable (Int, Int, Int, UInt64) -> Void) async -> LoadResult {
        let started = ContinuousClock.now
        let measureFrom = started + options.warmup
        let end = measureFrom + options.duration
        let threadCount = max(1, min(options.threads, options.connections))
        // The event loops are plain threads, started here and now: they must not wait for a
        // free thread of the cooperative pool, or a busy process would shorten the run.
        let finished = FinishedThreads()
        var threadsStarted = threadCount
        if case .http2(let streams) = options.wire {
            // Each thread drives whole TCP connections: a connection's clients are neighbours.
            let groups = stride(from: 0, to: options.connections, by: max(1, streams)).map {
                Array($0..<min($0 + max(1, streams), options.connections))
            }
            threadsStarted = max(1, min(threadCount, groups.count))
            for thread in 0..<threadsStarted {
                let mine = Array(stride(from: thread, to: groups.count, by: threadsStarted).map { groups[$0] })
                let rateShare = options.rate.map { $0 * Double(mine.reduce(0) { $0 + $1.count }) / Double(options.connections) }
                startThread(finished) {
                    HTTP2EventLoop(generator: self, groups: mine, measureFrom: measureFrom, end: end, rateShare: rateShare).run()
                }
            }
        } else {
            for thread in 0..<threadCount {
                let connections = Array(stride(from: thread, to: options.connections, by: threadCount))
                let rateShare = options.rate.map { $0 / Double(threadCount) }
                startThread(finished) {
                    EventLoop(generator: self, connections: connections, measureFrom: measureFrom, end: end, rateShare: rateShare).run()
                }
            }
        }
        var second = 0
        var failuresBefore = 0
        while ContinuousClock.now < end {
            try? await Task.sleep(until: started + .seconds(second + 1))
            second += 1
            let count = secondCount.exchange(0, ordering: .relaxed)
            let histogram = secondHistogram.withLock { current in
                defer { current = LatencyHistogram() }
                return current
            }
            let (failures, p99) = shared.withLock { ($0.failures, $0.histogram.percentile(0.99)) }
            // Seconds that began before the warm-up ended are not part of the timeline.
            if started + .seconds(second - 1) >= measureFrom {
                shared.withLock {
                    $0.throughputTimeline.append(count)
                    $0.p99Timeline.append(histogram.percentile(0.99))
                    $0.failureTimeline.append(failures - failuresBefore)
                }
            }
            failuresBefore = failures
            progress(second, count, failures, p99)
        }
        await finished.wait(for: threadsStarted)
        return shared.withLock { result in
            var final = result
            final.measuredSeconds = options.duration.inSeconds
            return final
        }
    }

    /// Starts a plain thread running `loop`, then counted as finished.
    private func startThread(_ finished: FinishedThreads, _ loop: @escaping @Sendable () -> Void) {
        let worker = Thread {
            loop()
            finished.done()
        }
        worker.stackSize = 1 << 20
        worker.start()
    }

    // MARK: - Called by the event loops

    func recordAnswer(status: Int, latency: UInt64, measured: Bool) {
        guard measured else { return }
        shared.withLock {
            $0.statuses[status, default: 0] += 1
            $0.histogram.record(latency)
        }
        secondHistogram.withLock { $0.record(latency) }
        if (200..<300).contains(status) { secondCount.add(1, ordering: .relaxed) }
    }

    func recordError(_ kind: String, measured: Bool) {
        guard measured else { return }
        shared.withLock { $0.errors[kind, default: 0] += 1 }
    }

    /// The outcome of a write to `pair`: its answer's status, or `nil` when none came.
    func recordExpectation(_ pair: CorrectnessCheck.Pair, _ expectation: CorrectnessCheck.Expectation, status: Int?) {
        shared.withLock {
            $0.expectations[pair] = expectation
            if case .holds(let kinds) = expectation, kinds.count > 1 { $0.severalKindsAnswers += 1 }
            $0.toggles[pair, default: CorrectnessCheck.ToggleTally()].record(expectation: expectation, status: status)
        }
    }

}

/// Lets the caller await event-loop threads without blocking a cooperative thread.
private final class FinishedThreads: Sendable {
    private let state = Mutex<(count: Int, waiter: (Int, CheckedContinuation<Void, Never>)?)>((0, nil))

    func done() {
        let waiter: CheckedContinuation<Void, Never>? = state.withLock { state in
            state.count += 1
            if let (wanted, continuation) = state.waiter, state.count >= wanted {
                state.waiter = nil
                return continuation
            }
            return nil
        }
        waiter?.resume()
    }

    func wait(for count: Int) async {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Bool in
                if state.count >= count { return true }
                state.waiter = (count, continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }
}
