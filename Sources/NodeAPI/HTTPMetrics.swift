import CounterCore
import NodeHTTP
import Synchronization

/// Request counts by route and status, and latency histograms by route, for `/metrics`.
final class HTTPMetrics: Sendable {
    /// Upper bounds of the latency buckets, in seconds.
    static let bucketBounds: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]

    private struct Histogram {
        var buckets = [Int](repeating: 0, count: HTTPMetrics.bucketBounds.count)
        var count = 0
        var sum = 0.0

        mutating func record(_ seconds: Double) {
            if let bucket = HTTPMetrics.bucketBounds.firstIndex(where: { seconds <= $0 }) { buckets[bucket] += 1 }
            count += 1
            sum += seconds
        }
    }

    private struct State {
        var requests: [String: [Int: Int]] = [:]
        var latency: [String: Histogram] = [:]
    }

    private let state = Mutex(State())
    /// Requests by the protocol they came over.
    private let http1Requests = Atomic<Int>(0)
    private let http2Requests = Atomic<Int>(0)

    /// Counts a request under the protocol it came over (every request, before it is routed).
    func count(_ httpProtocol: HTTPProtocol) {
        switch httpProtocol {
        case .http1: http1Requests.add(1, ordering: .relaxed)
        case .http2: http2Requests.add(1, ordering: .relaxed)
        }
    }

    /// Counts `response` under the route labelled `route`, timed from `started`.
    func record(_ route: String, _ response: HTTPResponse, since started: ContinuousClock.Instant) {
        record(route: route, status: response.status, seconds: (ContinuousClock.now - started).inSeconds)
    }

    func record(route: String, status: Int, seconds: Double) {
        state.withLock { state in
            state.requests[route, default: [:]][status, default: 0] += 1
            // In place: copying the histogram out and back would copy its buckets every time.
            state.latency[route, default: Histogram()].record(seconds)
        }
    }

    /// The Prometheus text exposition of what was recorded.
    func render(into text: inout String) {
        let snapshot = state.withLock { $0 }
        text += "# HELP counter_http_protocol_requests_total Requests received, by the protocol they came over (HTTP/1.1 or HTTP/2).\n"
        text += "# TYPE counter_http_protocol_requests_total counter\n"
        for httpProtocol in HTTPProtocol.allCases {
            let count = httpProtocol == .http1 ? http1Requests.load(ordering: .relaxed) : http2Requests.load(ordering: .relaxed)
            text += "counter_http_protocol_requests_total{protocol=\"\(httpProtocol.rawValue)\"} \(count)\n"
        }
        text += "# HELP counter_http_requests_total HTTP requests answered, by route and status.\n"
        text += "# TYPE counter_http_requests_total counter\n"
        for (route, statuses) in snapshot.requests.sorted(by: { $0.key < $1.key }) {
            for (status, count) in statuses.sorted(by: { $0.key < $1.key }) {
                text += "counter_http_requests_total{route=\"\(route)\",status=\"\(status)\"} \(count)\n"
            }
        }
        text += "# HELP counter_http_request_duration_seconds Time from a complete request to its answer, by route.\n"
        text += "# TYPE counter_http_request_duration_seconds histogram\n"
        for (route, histogram) in snapshot.latency.sorted(by: { $0.key < $1.key }) {
            MetricsText.histogramSamples(
                "counter_http_request_duration_seconds", labels: "route=\"\(route)\"",
                bounds: HTTPMetrics.bucketBounds, buckets: histogram.buckets,
                count: histogram.count, sum: histogram.sum, into: &text)
        }
    }
}
