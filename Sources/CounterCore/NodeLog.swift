import Foundation

/// Log levels, least to most important.
public enum LogLevel: String, Sendable, Comparable, CaseIterable {
    case debug, info, warn, error

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// How log lines are written.
public enum LogFormat: String, Sendable, CaseIterable {
    /// `time=… level=… event=… key=value …`, values with spaces, quotes or `=` in double quotes.
    case text
    /// One JSON object per line, for log shippers: `{"time":…,"level":…,"event":…,"key":"value",…}`,
    /// the same fields as the text form, every value a string.
    case json
}

/// Structured logs: one line per event, `key=value` pairs after the time, level and event name
/// (or the same as one JSON object, `LogFormat.json`).
/// The composition root makes one and passes it down to every part that has something to say
/// (flush retries, dead letters, reconnects, large hydrations, refused writes).
public struct NodeLog: Sendable {
    public let minimum: LogLevel
    public let format: LogFormat
    private let write: @Sendable (String) -> Void

    /// Lines at `minimum` and above go to standard error.
    public init(minimum: LogLevel, format: LogFormat = .text) {
        self.init(minimum: minimum, format: format) { line in FileHandle.standardError.write(Data((line + "\n").utf8)) }
    }

    /// Lines at `minimum` and above go to `write` (tests read them this way).
    public init(minimum: LogLevel, format: LogFormat = .text, write: @escaping @Sendable (String) -> Void) {
        self.minimum = minimum
        self.format = format
        self.write = write
    }

    /// Says nothing: for parts used without a node (tests, the bench).
    public static let silent = NodeLog(minimum: .error) { _ in }

    public func log(_ level: LogLevel, _ event: String, _ fields: KeyValuePairs<String, String> = [:]) {
        guard level >= minimum else { return }
        write(Self.line(format, time: Date().ISO8601Format(), level, event, Array(fields)))
    }

    /// `log` with fields built at run time.
    public func log(_ level: LogLevel, _ event: String, fields: [(key: String, value: String)]) {
        guard level >= minimum else { return }
        write(Self.line(format, time: Date().ISO8601Format(), level, event, fields))
    }

    /// One line, as `log` writes it. Pure.
    public static func line(
        _ format: LogFormat, time: String, _ level: LogLevel, _ event: String,
        _ fields: [(key: String, value: String)]
    ) -> String {
        switch format {
        case .text:
            var line = "time=\(time) level=\(level.rawValue) event=\(event)"
            for (key, value) in fields {
                let quoted =
                    value.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" })
                    ? "\"" + value.replacingOccurrences(of: "\"", with: "\\\"") + "\"" : value
                line += " \(key)=\(quoted)"
            }
            return line
        case .json:
            var line = "{\"time\":\(jsonString(time)),\"level\":\(jsonString(level.rawValue)),\"event\":\(jsonString(event))"
            for (key, value) in fields { line += ",\(jsonString(key)):\(jsonString(value))" }
            return line + "}"
        }
    }

    /// `text` as a JSON string: quotes, backslashes and control characters escaped.
    static func jsonString(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
