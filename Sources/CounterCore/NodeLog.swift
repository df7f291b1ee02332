import Foundation

/// Log levels, least to most important.
public enum LogLevel: String, Sendable, Comparable, CaseIterable {
    case debug, info, warn, error

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// Structured logs: one line per event, `key=value` pairs after the time, level and event name.
/// The composition root makes one and passes it down to every part that has something to say
/// (flush retries, dead letters, reconnects, large hydrations, refused writes).
public struct NodeLog: Sendable {
    public let minimum: LogLevel
    private let write: @Sendable (String) -> Void

    /// Lines at `minimum` and above go to standard error.
    public init(minimum: LogLevel) {
        self.init(minimum: minimum) { line in FileHandle.standardError.write(Data((line + "\n").utf8)) }
    }

    /// Lines at `minimum` and above go to `write` (tests read them this way).
    public init(minimum: LogLevel, write: @escaping @Sendable (String) -> Void) {
        self.minimum = minimum
        self.write = write
    }

    /// Says nothing: for parts used without a node (tests, the bench).
    public static let silent = NodeLog(minimum: .error) { _ in }

    public func log(_ level: LogLevel, _ event: String, _ fields: KeyValuePairs<String, String> = [:]) {
        guard level >= minimum else { return }
        var line = "time=\(Date().ISO8601Format()) level=\(level.rawValue) event=\(event)"
        for (key, value) in fields {
            let quoted = value.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" })
                ? "\"" + value.replacingOccurrences(of: "\"", with: "\\\"") + "\"" : value
            line += " \(key)=\(quoted)"
        }
        write(line)
    }
}
