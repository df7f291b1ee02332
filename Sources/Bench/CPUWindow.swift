import CounterCore
import Foundation
import Synchronization

/// The nodes' CPU over a run's measured seconds: their `process_cpu_seconds_total` read at the
/// end of the warm-up and at the end, with the wall-clock time between.
final class CPUWindow: Sendable {
    private let cluster: ClusterView
    private let token: String?
    private let marks = Mutex<(start: (cpu: Double, at: ContinuousClock.Instant)?, end: (cpu: Double, at: ContinuousClock.Instant)?)>((nil, nil))

    init(cluster: ClusterView, token: String?) {
        self.cluster = cluster
        self.token = token
    }

    /// Reads the counters now, as the window's start or end.
    func mark(start: Bool) {
        guard let cpu = cluster.cpuSeconds(token: token) else { return }
        let now = ContinuousClock.now
        marks.withLock { if start { $0.start = (cpu, now) } else { $0.end = (cpu, now) } }
    }

    /// CPU microseconds per request at `throughput` requests/s, or `nil` when a node did not tell.
    func microsecondsPerRequest(throughput: Double) -> Double? {
        marks.withLock { marks in
            guard let start = marks.start, let end = marks.end, throughput > 0 else { return nil }
            let seconds = (end.at - start.at).inSeconds
            guard seconds > 0 else { return nil }
            return (end.cpu - start.cpu) / (throughput * seconds) * 1e6
        }
    }
}
