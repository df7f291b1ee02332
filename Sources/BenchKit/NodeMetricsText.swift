/// The figures the bench reads from a node's `/metrics` (Prometheus text): its CPU seconds and
/// the buckets of its write-behind lag histogram. Pure: text in, numbers out.
public struct NodeMetricsText: Sendable, Equatable {
    /// `process_cpu_seconds_total`, if the text has it.
    public var cpuSeconds: Double?
    /// `counter_write_behind_lag_seconds_bucket`: cumulative counts by upper bound in seconds
    /// (`+Inf` as `.infinity`).
    public var lagBuckets: [Double: Double] = [:]
    /// `counter_hot_reads_total` and `counter_cold_reads_total`, summed over the shards: reads
    /// answered from Redis and from PostgreSQL.
    public var hotReads = 0.0
    public var coldReads = 0.0

    public init(cpuSeconds: Double? = nil, lagBuckets: [Double: Double] = [:], hotReads: Double = 0, coldReads: Double = 0) {
        self.cpuSeconds = cpuSeconds
        self.lagBuckets = lagBuckets
        self.hotReads = hotReads
        self.coldReads = coldReads
    }

    /// Reads `text`; lines it does not know are skipped.
    public init(parsing text: String) {
        let bucketPrefix = "counter_write_behind_lag_seconds_bucket{le=\""
        for line in text.split(separator: "\n") {
            if line.hasPrefix("process_cpu_seconds_total ") {
                cpuSeconds = Double(line.dropFirst("process_cpu_seconds_total ".count))
            } else if line.hasPrefix("counter_hot_reads_total{") || line.hasPrefix("counter_cold_reads_total{") {
                guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
                if line.hasPrefix("counter_hot") { hotReads += value } else { coldReads += value }
            } else if line.hasPrefix(bucketPrefix) {
                let rest = line.dropFirst(bucketPrefix.count)
                guard let quote = rest.firstIndex(of: "\""), let space = rest.lastIndex(of: " "),
                    let count = Double(rest[rest.index(after: space)...])
                else { continue }
                let bound = rest[..<quote] == "+Inf" ? Double.infinity : Double(rest[..<quote])
                if let bound { lagBuckets[bound] = count }
            }
        }
    }

    /// The `q` quantile of a Prometheus histogram given as cumulative counts by upper bound,
    /// interpolated linearly inside its bucket (as Prometheus's `histogram_quantile` does, the
    /// first bucket starting at 0); a quantile in the `+Inf` bucket reads as the last finite
    /// bound. `nil` when it holds nothing.
    public static func quantile(_ q: Double, of buckets: [Double: Double]) -> Double? {
        let bounds = buckets.keys.sorted()
        guard let total = bounds.last.flatMap({ buckets[$0] }), total > 0 else { return nil }
        let rank = q * total
        var lower = 0.0
        var below = 0.0
        for bound in bounds {
            let count = buckets[bound]!
            if count >= rank {
                guard bound.isFinite else { return lower }
                let inBucket = count - below
                return inBucket > 0 ? lower + (bound - lower) * (rank - below) / inBucket : bound
            }
            if bound.isFinite { lower = bound }
            below = count
        }
        return lower
    }
}
