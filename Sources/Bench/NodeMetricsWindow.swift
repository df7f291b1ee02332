import BenchKit
import CounterCore
import Foundation
import Synchronization

/// What the nodes' `/metrics` say about a run: their CPU (`process_cpu_seconds_total`) between
/// the end of the warm-up and the end of the run, and how long acknowledged changes waited for
/// PostgreSQL (`counter_write_behind_lag_seconds`) between the end of the warm-up and the flush
/// after the run — summed over every node of the cluster.
final class NodeMetricsWindow: Sendable {
    /// One reading of every node.
    struct Reading: Sendable {
        var cpuSeconds = 0.0
        /// Cumulative lag bucket counts by upper bound in seconds (`+Inf` as `.infinity`).
        var lagBuckets: [Double: Double] = [:]
        var hotReads = 0.0
        var coldReads = 0.0
        var at = ContinuousClock.now
    }

    private let cluster: ClusterView
    private let token: String?
    private let readings = Mutex<(start: Reading?, cpuEnd: Reading?, lagEnd: Reading?)>((nil, nil, nil))

    init(cluster: ClusterView, token: String?) {
        self.cluster = cluster
        self.token = token
    }

    enum Mark { case start, endOfRun, afterFlush }

    /// Reads every node now, as the window's start, the run's end (CPU) or after the final
    /// flush (lag). A node that does not answer leaves the mark unset.
    func mark(_ mark: Mark) {
        guard let reading = read() else { return }
        readings.withLock { readings in
            switch mark {
            case .start: readings.start = reading
            case .endOfRun: readings.cpuEnd = reading
            case .afterFlush: readings.lagEnd = reading
            }
        }
    }

    /// CPU microseconds per request at `throughput` requests/s, or `nil` when a node did not tell.
    func microsecondsPerRequest(throughput: Double) -> Double? {
        readings.withLock { readings in
            guard let start = readings.start, let end = readings.cpuEnd, throughput > 0 else { return nil }
            let seconds = (end.at - start.at).inSeconds
            guard seconds > 0 else { return nil }
            return (end.cpuSeconds - start.cpuSeconds) / (throughput * seconds) * 1e6
        }
    }

    /// The share of reads answered from Redis (not PostgreSQL) during the run, or `nil` when
    /// there were none (or a node did not tell).
    func readHitRatio() -> Double? {
        readings.withLock { readings in
            guard let start = readings.start, let end = readings.cpuEnd else { return nil }
            let hot = end.hotReads - start.hotReads
            let cold = end.coldReads - start.coldReads
            return hot + cold > 0 ? hot / (hot + cold) : nil
        }
    }

    /// The median and 99th percentile lag in milliseconds of the changes committed in the
    /// window, or `nil` when none was (or a node did not tell).
    func lagMilliseconds() -> (p50: Double, p99: Double)? {
        readings.withLock { readings in
            guard let start = readings.start, let end = readings.lagEnd else { return nil }
            var window: [Double: Double] = [:]
            for (bound, count) in end.lagBuckets { window[bound] = count - (start.lagBuckets[bound] ?? 0) }
            guard let p50 = NodeMetricsText.quantile(0.5, of: window), let p99 = NodeMetricsText.quantile(0.99, of: window) else { return nil }
            return (p50 * 1_000, p99 * 1_000)
        }
    }

    private func read() -> Reading? {
        var reading = Reading()
        for node in cluster.nodes {
            guard let (status, body) = try? OneShotHTTP.send(to: node, method: "GET", path: "/metrics", token: token, timeoutSeconds: 10),
                status == 200
            else { return nil }
            let figures = NodeMetricsText(parsing: body)
            guard let cpu = figures.cpuSeconds else { return nil }
            reading.cpuSeconds += cpu
            reading.hotReads += figures.hotReads
            reading.coldReads += figures.coldReads
            for (bound, count) in figures.lagBuckets { reading.lagBuckets[bound, default: 0] += count }
        }
        return reading
    }
}
