/// The faults of a chaos run and when they come: pure, so the plan and the timeline are tested
/// without servers.
public enum ChaosFault: String, CaseIterable, Sendable {
    /// SIGKILL the node, start it again.
    case killNode = "kill -9 node"
    /// Stop PostgreSQL (fast shutdown) and start it again a few seconds later.
    case restartPostgres = "restart PostgreSQL"
    /// SIGKILL Redis, start it again (what it had not written to its AOF is gone).
    case killRedis = "kill -9 Redis"
    /// SIGSTOP the node for a few seconds, then SIGCONT.
    case pauseNode = "SIGSTOP node"
    /// Stop PostgreSQL until a shard's backlog reaches its limit (writes get 503), then start it.
    case backlogPastLimit = "backlog past its limit"
    /// A trigger that refuses the poison user's rows, dropped again some seconds later.
    case poisonTrigger = "poison trigger"
}

/// When each fault begins.
public struct ChaosSchedule: Sendable, Equatable {
    public struct Entry: Sendable, Equatable {
        public let at: Duration
        public let fault: ChaosFault
    }

    public let entries: [Entry]

    /// Faults every `spacing` from `start` on, each kind in turn, as long as one still begins
    /// `quietEnd` before `duration` ends (the last stretch lets everything settle before the check).
    public init(
        duration: Duration, start: Duration = .seconds(8), spacing: Duration = .seconds(17),
        quietEnd: Duration = .seconds(12)
    ) {
        var entries: [Entry] = []
        var at = start
        var kind = 0
        while at + quietEnd <= duration {
            entries.append(Entry(at: at, fault: ChaosFault.allCases[kind % ChaosFault.allCases.count]))
            at += spacing
            kind += 1
        }
        self.entries = entries
    }
}

/// What happened during a chaos run, second by second, and the faults laid over it.
public struct ChaosTimeline: Sendable {
    /// One fault as it happened: when it began and ended (seconds since the load began) and what
    /// was seen (recovery time, say).
    public struct Event: Sendable, Equatable {
        public let fault: ChaosFault
        public let began: Double
        public let ended: Double
        public let note: String

        public init(fault: ChaosFault, began: Double, ended: Double, note: String) {
            self.fault = fault
            self.began = began
            self.ended = ended
            self.note = note
        }
    }

    /// Answers with a 2xx status, per second.
    public var answered: [Int] = []
    /// Failures (non-2xx answers and requests without an answer), per second.
    public var failed: [Int] = []
    public var events: [Event] = []

    public init() {}

    /// One row per `bucket` seconds: the time, the answers and failures per second in it, and
    /// the faults that began in it; then one line per fault.
    public func render(bucket: Int = 5) -> String {
        var lines = ["   seconds   ok/s  failed/s  faults"]
        let seconds = max(answered.count, failed.count)
        for start in stride(from: 0, to: seconds, by: max(1, bucket)) {
            let end = min(seconds, start + bucket)
            let span = Double(end - start)
            let ok = answered[start..<min(end, answered.count)].reduce(0, +)
            let bad = failed[start..<min(end, failed.count)].reduce(0, +)
            let faults = events.filter { $0.began >= Double(start) && $0.began < Double(end) }.map(\.fault.rawValue)
            let bar = String(repeating: "#", count: min(40, Int((Double(ok) / span) / Double(max(1, peak)) * 40)))
            lines.append(
                Self.pad("\(start)-\(end)", 10) + Self.pad(String(Int(Double(ok) / span)), 7) + Self.pad(String(Int(Double(bad) / span)), 10)
                    + "  " + bar + String(repeating: " ", count: 41 - bar.count) + faults.joined(separator: ", "))
        }
        for event in events {
            lines.append(
                "  \(event.fault.rawValue) at \(String(format: "%.1f", event.began)) s, over at \(String(format: "%.1f", event.ended)) s: \(event.note)"
            )
        }
        return lines.joined(separator: "\n")
    }

    private var peak: Int { answered.max() ?? 1 }

    private static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
    }
}
