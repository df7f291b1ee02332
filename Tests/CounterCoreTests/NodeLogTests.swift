import CounterCore
import Foundation
import Synchronization
import Testing

@Suite("Log lines (pure)")
struct NodeLogTests {
    static let awkward = "a \"quoted\" value with = and \\ and\nnewline\tand \u{01} and é"

    @Test("json: one object per line with the text form's fields, every value a string, anything escaped")
    func jsonLines() throws {
        let fields: [(key: String, value: String)] = [("node", "node-1"), ("error", Self.awkward), ("count", "3")]
        let line = NodeLog.line(.json, time: "2026-12-01T07:00:00Z", .warn, "flush_failed", fields)
        #expect(!line.contains("\n"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String])
        #expect(
            object == [
                "time": "2026-12-01T07:00:00Z", "level": "warn", "event": "flush_failed",
                "node": "node-1", "error": Self.awkward, "count": "3",
            ])
        // The order is the text form's: time, level, event, then the fields as given.
        #expect(line.hasPrefix(#"{"time":"2026-12-01T07:00:00Z","level":"warn","event":"flush_failed","node":"node-1","error":"#))
        let text = NodeLog.line(.text, time: "2026-12-01T07:00:00Z", .warn, "flush_failed", [("node", "node-1"), ("count", "3")])
        #expect(text == "time=2026-12-01T07:00:00Z level=warn event=flush_failed node=node-1 count=3")
    }

    @Test("a node log in json writes parseable lines, and honours its level")
    func writer() throws {
        let lines = Mutex<[String]>([])
        let log = NodeLog(minimum: .info, format: .json) { line in lines.withLock { $0.append(line) } }
        log.log(.debug, "hidden")
        log.log(.info, "listening", ["url": "http://127.0.0.1:8080"])
        let written = lines.withLock { $0 }
        #expect(written.count == 1)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(written[0].utf8)) as? [String: String])
        #expect(object["event"] == "listening" && object["url"] == "http://127.0.0.1:8080" && object["level"] == "info")
        #expect(object["time"].flatMap { ISO8601DateFormatter().date(from: $0) } != nil)
    }
}
