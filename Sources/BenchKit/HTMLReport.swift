import Foundation

/// A self-contained HTML page (inline SVG, no scripts, no outside files) with the results of one
/// or more runs: a table, requests per second over time, and latency percentiles.
public enum HTMLReport {
    /// One run to show.
    public struct Run: Sendable {
        public let label: String
        public let connections: Int
        public let result: LoadResult
        public let verdict: String?

        public init(label: String, connections: Int, result: LoadResult, verdict: String?) {
            self.label = label
            self.connections = connections
            self.result = result
            self.verdict = verdict
        }
    }

    public static func render(title: String, runs: [Run]) -> String {
        var html = """
            <!doctype html><html><head><meta charset="utf-8"><title>\(escape(title))</title>
            <style>body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse}
            td,th{padding:4px 10px;border-bottom:1px solid #ddd;text-align:right}td:first-child,th:first-child{text-align:left}
            .charts{display:flex;flex-wrap:wrap;gap:24px}figure{margin:0}figcaption{font-size:13px;color:#555}</style>
            </head><body><h1>\(escape(title))</h1>
            <table><tr><th>target</th><th>conns</th><th>req/s</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th><th>p99.9 ms</th><th>max ms</th><th>failures</th><th>check</th></tr>

            """
        for run in runs {
            let h = run.result.histogram
            let cells = [h.percentile(0.5), h.percentile(0.9), h.percentile(0.99), h.percentile(0.999), h.maximum]
                .map { milliseconds($0) }
            html +=
                "<tr><td>\(escape(run.label))</td><td>\(run.connections)</td><td>\(Int(run.result.throughput.rounded()))</td>"
                + cells.map { "<td>\($0)</td>" }.joined()
                + "<td>\(run.result.failures)</td><td>\(escape(run.verdict ?? ""))</td></tr>\n"
        }
        html += "</table>\n<h2>Requests per second over time</h2><div class=\"charts\">\n"
        for run in runs {
            html +=
                "<figure>\(lineChart(run.result.throughputTimeline.map(Double.init), unit: "req/s"))"
                + "<figcaption>\(escape(run.label)), \(run.connections) connections</figcaption></figure>\n"
        }
        html += "</div>\n<h2>Latency percentiles (ms)</h2><div class=\"charts\">\n"
        for run in runs {
            let h = run.result.histogram
            let values = [
                ("p50", h.percentile(0.5)), ("p90", h.percentile(0.9)), ("p99", h.percentile(0.99)),
                ("p99.9", h.percentile(0.999)), ("max", h.maximum),
            ]
            html +=
                "<figure>\(barChart(values.map { ($0.0, Double($0.1) / 1_000) }))"
                + "<figcaption>\(escape(run.label)), \(run.connections) connections</figcaption></figure>\n"
        }
        html += "</div></body></html>\n"
        return html
    }

    static func lineChart(_ values: [Double], unit: String, width: Double = 360, height: Double = 160) -> String {
        let top = max(values.max() ?? 1, 1)
        let step = values.count > 1 ? (width - 50) / Double(values.count - 1) : 0
        let points = values.enumerated().map { index, value in
            String(format: "%.1f,%.1f", 45 + Double(index) * step, height - 20 - (value / top) * (height - 40))
        }.joined(separator: " ")
        return """
            <svg width="\(Int(width))" height="\(Int(height))" viewBox="0 0 \(Int(width)) \(Int(height))" xmlns="http://www.w3.org/2000/svg">\
            <line x1="45" y1="\(Int(height - 20))" x2="\(Int(width - 5))" y2="\(Int(height - 20))" stroke="#999"/>\
            <line x1="45" y1="20" x2="45" y2="\(Int(height - 20))" stroke="#999"/>\
            <text x="0" y="24" font-size="11">\(Int(top))</text><text x="0" y="\(Int(height - 22))" font-size="11">0</text>\
            <text x="\(Int(width - 60))" y="\(Int(height - 4))" font-size="11">seconds</text>\
            <polyline fill="none" stroke="#2a6fdb" stroke-width="2" points="\(points)"/></svg>
            """
    }

    static func barChart(_ bars: [(String, Double)], width: Double = 360, height: Double = 160) -> String {
        let top = max(bars.map(\.1).max() ?? 1, 0.001)
        let slot = (width - 20) / Double(max(bars.count, 1))
        var svg =
            "<svg width=\"\(Int(width))\" height=\"\(Int(height))\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" xmlns=\"http://www.w3.org/2000/svg\">"
        for (index, (name, value)) in bars.enumerated() {
            let barHeight = max(1, value / top * (height - 50))
            let x = 10 + Double(index) * slot
            svg += String(
                format: "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#e07a2f\"/>", x + 6, height - 25 - barHeight, slot - 12,
                barHeight)
            svg += String(format: "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">", x + 6, height - 10) + escape(name) + "</text>"
            svg += String(format: "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\">%.2f</text>", x + 6, height - 28 - barHeight, value)
        }
        return svg + "</svg>"
    }

    static func milliseconds(_ microseconds: UInt64) -> String {
        String(format: "%.2f", Double(microseconds) / 1_000)
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
