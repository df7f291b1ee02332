import Foundation

/// Log levels, least to most important.
public enum LogLevel: String, Sendable, Comparable, CaseIterable {
    case debug, info, warn, error

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// Structured logs: one line per event on standard error, `key=value` pairs after the time,
/// level and event name.
public struct NodeLog: Sendable {
    public let minimum: LogLevel

    public init(minimum: LogLevel) {
        self.minimum = minimum
    }

    public func log(_ level: LogLevel, _ event: String, _ fields: KeyValuePairs<String, String> = [:]) {
        guard level >= minimum else { return }
        var line = "time=\(Date().ISO8601Format()) level=\(level.rawValue) event=\(event)"
        for (key, value) in fields {
            let quoted = value.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" })
                ? "\"" + value.replacingOccurrences(of: "\"", with: "\\\"") + "\"" : value
            line += " \(key)=\(quoted)"
        }
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}
