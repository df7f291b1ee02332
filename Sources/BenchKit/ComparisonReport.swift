import Foundation

/// The page `counter-bench compare --html` writes: what a reader wants first — the ratios in
/// words, throughput by connections for the node against the SQL designs and the ceiling (log
/// scale), latency percentiles side by side at each level, the write-behind lag, the node's CPU
/// per request — then the whole table. Self-contained (inline SVG, no scripts). Pure.
public enum ComparisonReport {
    /// One measured row of the comparison.
    public struct Row: Sendable {
        /// Which line it belongs to across levels: `hot`, `hot-user`, `seed-sql`, `ceiling`, ….
        public let series: String
        public let label: String
        public let connections: Int
        public let throughput: Double
        /// p50, p90, p99 in milliseconds.
        public let latency: (p50: Double, p90: Double, p99: Double)
        public let failures: Int
        /// Node CPU microseconds per request, when measured.
        public let nodeCPU: Double?
        /// Acknowledgement → PostgreSQL commit, p50 and p99 in milliseconds, for write rows.
        public let lag: (p50: Double, p99: Double)?
        public let verdict: String?

        public init(
            series: String, label: String, connections: Int, throughput: Double, latency: (p50: Double, p90: Double, p99: Double),
            failures: Int, nodeCPU: Double?, lag: (p50: Double, p99: Double)?, verdict: String?
        ) {
            self.series = series
            self.label = label
            self.connections = connections
            self.throughput = throughput
            self.latency = latency
            self.failures = failures
            self.nodeCPU = nodeCPU
            self.lag = lag
            self.verdict = verdict
        }
    }

    /// The lines of the throughput chart, in legend order, with their colours and names.
    static let lines: [(series: String, name: String, short: String, colour: String)] = [
        ("hot", "CounterService node (service token)", "node", "#1f6feb"),
        ("hot-user", "node, end users' tokens", "user tokens", "#54aeff"),
        ("hot-cluster", "node on a Redis Cluster", "Redis Cluster", "#8250df"),
        ("redis-lua", "Redis Lua toggle (no HTTP, no PostgreSQL)", "Redis Lua", "#2da44e"),
        ("ceiling", "GET /healthz (HTTP ceiling)", "/healthz", "#8c959f"),
        ("sql-upsert", "best single SQL statement", "sql-upsert", "#d4a72c"),
        ("seed-sql", "the seed's transaction (row lock)", "seed-sql", "#cf222e"),
        ("laravel-seed", "the seed's Laravel endpoint (php-fpm, nginx)", "laravel-seed", "#953800"),
    ]

    public static func render(title: String, context: String, rows: [Row], ratios: [String]) -> String {
        var html = """
            <!doctype html><html><head><meta charset="utf-8"><title>\(escape(title))</title>
            <style>body{font-family:"DejaVu Sans",system-ui,sans-serif;margin:28px 36px;color:#1f2328;max-width:1180px}
            h1{font-size:26px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px}.context{color:#59636e;font-size:13px}
            .ratios{font-size:16px;line-height:1.5;background:#f6f8fa;border-left:4px solid #1f6feb;padding:10px 16px;margin:16px 0}
            .ratios p{margin:4px 0}table{border-collapse:collapse;font-size:12px}td,th{padding:3px 8px;border-bottom:1px solid #d1d9e0;text-align:right}
            td:first-child,th:first-child{text-align:left}.grid{display:flex;flex-wrap:wrap;gap:18px}figure{margin:0}
            figcaption{font-size:12px;color:#59636e}</style></head><body>
            <h1>\(escape(title))</h1><div class="context">\(escape(context))</div>
            <div class="ratios">\(ratios.map { "<p>\(escape($0))</p>" }.joined())</div>

            """
        html += "<h2>Throughput by connections (requests/s, log scale)</h2>\n" + throughputChart(rows)
        let levels = Array(Set(rows.filter { lines.map(\.series).contains($0.series) }.map(\.connections))).sorted()
        html += "<h2>Latency at each level: p50, p90, p99 (ms, log scale)</h2><div class=\"grid\">\n"
        for level in levels {
            let atLevel = lines.compactMap { line in rows.first { $0.series == line.series && $0.connections == level }.map { (line, $0) } }
            html += "<figure>\(latencyChart(atLevel))<figcaption>\(level) connections</figcaption></figure>\n"
        }
        html += "</div>\n"
        let lagRows = rows.filter { $0.lag != nil }
        if !lagRows.isEmpty {
            html +=
                "<h2>Write-behind lag: acknowledgement to PostgreSQL commit (ms)</h2>\n"
                + horizontalBars(lagRows.map { ("\($0.label), \($0.connections)", [$0.lag!.p50, $0.lag!.p99]) }, legend: ["p50", "p99"], unit: "ms")
        }
        let cpuRows = rows.filter { $0.nodeCPU != nil }
        if !cpuRows.isEmpty {
            html +=
                "<h2>Node CPU per request (µs; all nodes of the target summed)</h2>\n"
                + horizontalBars(cpuRows.map { ("\($0.label), \($0.connections)", [$0.nodeCPU!]) }, legend: ["node"], unit: "µs")
                + "<p class=\"context\">Redis's and PostgreSQL's CPU per request by process: scripts/bench-cpu.</p>\n"
        }
        html +=
            "<h2>Every row</h2><table><tr><th>target</th><th>conns</th><th>req/s</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th>"
            + "<th>failures</th><th>node µs/req</th><th>lag p50/p99 ms</th><th>check</th></tr>\n"
        for row in rows {
            html +=
                "<tr><td>\(escape(row.label))</td><td>\(row.connections)</td><td>\(Int(row.throughput.rounded()))</td>"
                + [row.latency.p50, row.latency.p90, row.latency.p99].map { String(format: "<td>%.2f</td>", $0) }.joined()
                + "<td>\(row.failures)</td><td>\(row.nodeCPU.map { String(format: "%.1f", $0) } ?? "–")</td>"
                + "<td>\(row.lag.map { String(format: "%.0f/%.0f", $0.p50, $0.p99) } ?? "–")</td><td>\(escape(row.verdict ?? ""))</td></tr>\n"
        }
        return html + "</table></body></html>\n"
    }

    /// Decades spanning `values` (at least one), for a log axis.
    static func decades(_ values: [Double]) -> (low: Double, high: Double) {
        let positive = values.filter { $0 > 0 }
        let low = floor(log10(positive.min() ?? 1))
        let high = max(ceil(log10(positive.max() ?? 10)), low + 1)
        return (low, high)
    }

    static func throughputChart(_ rows: [Row]) -> String {
        let width = 1100.0
        let height = 420.0
        let left = 70.0
        let right = 330.0
        let top = 20.0
        let bottom = 40.0
        let shown = rows.filter { row in lines.contains { $0.series == row.series } }
        let levels = Array(Set(shown.map(\.connections))).sorted()
        guard !levels.isEmpty else { return "" }
        let (low, high) = decades(shown.map(\.throughput))
        let plotWidth = width - left - right
        let plotHeight = height - top - bottom
        func x(_ level: Int) -> Double {
            levels.count == 1 ? left + plotWidth / 2 : left + Double(levels.firstIndex(of: level)!) / Double(levels.count - 1) * plotWidth
        }
        func y(_ value: Double) -> Double { top + plotHeight - (log10(max(value, pow(10, low))) - low) / (high - low) * plotHeight }
        var svg = "<svg width=\"\(Int(width))\" height=\"\(Int(height))\" xmlns=\"http://www.w3.org/2000/svg\" font-size=\"12\">"
        for decade in Int(low)...Int(high) {
            let value = pow(10, Double(decade))
            svg += String(
                format: "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#d1d9e0\"/>", left, y(value), left + plotWidth, y(value))
            svg += String(format: "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%@</text>", left - 8, y(value) + 4, grouped(value) as NSString)
        }
        for level in levels {
            svg += String(format: "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%d connections</text>", x(level), height - 14, level)
        }
        var drawn = 0
        for line in lines {
            let points = levels.compactMap { level in shown.first { $0.series == line.series && $0.connections == level } }
            guard !points.isEmpty else { continue }
            let index = drawn
            drawn += 1
            let path = points.map { String(format: "%.1f,%.1f", x($0.connections), y($0.throughput)) }.joined(separator: " ")
            svg += "<polyline fill=\"none\" stroke=\"\(line.colour)\" stroke-width=\"3\" points=\"\(path)\"/>"
            for point in points {
                svg += String(
                    format: "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%@\"/>", x(point.connections), y(point.throughput),
                    line.colour as NSString)
            }
            let legendY = top + 16 + Double(index) * 22
            svg += String(
                format: "<rect x=\"%.0f\" y=\"%.0f\" width=\"18\" height=\"4\" fill=\"%@\"/>", width - right + 20, legendY - 5,
                line.colour as NSString)
            svg += String(format: "<text x=\"%.0f\" y=\"%.0f\">", width - right + 44, legendY) + escape(line.name) + "</text>"
        }
        return svg + "</svg>\n"
    }

    static func latencyChart(_ entries: [((series: String, name: String, short: String, colour: String), Row)]) -> String {
        let width = 560.0
        let height = 250.0
        let left = 56.0
        let top = 12.0
        let bottom = 56.0
        let (low, high) = decades(entries.flatMap { [$0.1.latency.p50, $0.1.latency.p99] })
        let plotHeight = height - top - bottom
        let group = (width - left - 10) / Double(max(entries.count, 1))
        func y(_ value: Double) -> Double { top + plotHeight - (log10(max(value, pow(10, low))) - low) / (high - low) * plotHeight }
        var svg = "<svg width=\"\(Int(width))\" height=\"\(Int(height))\" xmlns=\"http://www.w3.org/2000/svg\" font-size=\"11\">"
        for decade in Int(low)...Int(high) {
            let value = pow(10, Double(decade))
            svg += String(format: "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#d1d9e0\"/>", left, y(value), width - 10, y(value))
            svg += String(format: "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%@</text>", left - 6, y(value) + 4, grouped(value) as NSString)
        }
        for (index, (line, row)) in entries.enumerated() {
            let x0 = left + Double(index) * group
            let bar = (group - 12) / 3
            for (offset, (value, opacity)) in [(row.latency.p50, 1.0), (row.latency.p90, 0.7), (row.latency.p99, 0.45)].enumerated() {
                let x = x0 + 6 + Double(offset) * bar
                svg += String(
                    format: "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%@\" fill-opacity=\"%.2f\"/>",
                    x, y(value), bar - 1, top + plotHeight - y(value), line.colour as NSString, opacity)
            }
            svg +=
                String(format: "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">", x0 + group / 2, top + plotHeight + 16)
                + escape(line.short) + "</text>"
        }
        svg += String(format: "<text x=\"%.0f\" y=\"%.0f\" fill=\"#59636e\">bars of each target: p50, p90, p99 (lighter)</text>", left, height - 8)
        return svg + "</svg>"
    }

    static func horizontalBars(_ bars: [(String, [Double])], legend: [String], unit: String) -> String {
        let width = 1100.0
        let label = 330.0
        let rowHeight = 20.0
        let top = max(bars.flatMap(\.1).max() ?? 1, 0.001)
        let height = Double(bars.count) * rowHeight + 30
        var svg = "<svg width=\"\(Int(width))\" height=\"\(Int(height))\" xmlns=\"http://www.w3.org/2000/svg\" font-size=\"11\">"
        let colours = ["#1f6feb", "#9ecbff"]
        for (index, (name, values)) in bars.enumerated() {
            let y = 8 + Double(index) * rowHeight
            svg += String(format: "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">", label - 8, y + 12) + escape(name) + "</text>"
            // The larger value first, so the smaller one stays visible on top of it.
            for (offset, value) in values.enumerated().sorted(by: { $0.element > $1.element }) {
                let length = value / top * (width - label - 120)
                svg += String(
                    format: "<rect x=\"%.0f\" y=\"%.1f\" width=\"%.1f\" height=\"14\" fill=\"%@\"/>", label, y, max(1, length),
                    colours[offset % colours.count] as NSString)
            }
            svg +=
                String(format: "<text x=\"%.1f\" y=\"%.1f\">", label + (values.max() ?? 0) / top * (width - label - 120) + 6, y + 12)
                + values.map { String(format: "%.1f", $0) }.joined(separator: " / ") + " \(unit)</text>"
        }
        let legendText = legend.enumerated().map { "<tspan fill=\"\(colours[$0.offset % colours.count])\">■</tspan> \($0.element)" }.joined(
            separator: "  ")
        svg += String(format: "<text x=\"%.0f\" y=\"%.0f\">", label, height - 4) + legendText + "</text>"
        return svg + "</svg>\n"
    }

    /// 1, 10, 100, 1k, 10k, 100k, 1M; below 1: 0.1, 0.01.
    static func grouped(_ value: Double) -> String {
        switch value {
        case 1_000_000...: return "\(Int(value / 1_000_000))M"
        case 1_000...: return "\(Int(value / 1_000))k"
        case 1...: return "\(Int(value))"
        default: return String(format: "%g", value)
        }
    }

    static func escape(_ text: String) -> String { HTMLReport.escape(text) }
}
