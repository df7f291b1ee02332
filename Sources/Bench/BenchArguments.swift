/// Reads `--flag value` options of a bench mode, with ranges checked and clear errors.
struct BenchArguments {
    private let arguments: [String]
    private var index = 0

    init(_ arguments: [String]) {
        self.arguments = arguments
    }

    /// Calls `handle` with each flag; `handle` reads the flag's value with `value`/`number`.
    /// - Throws: `BenchUsageError` for an unknown flag (when `handle` returns `false`) or a bad value.
    mutating func forEachFlag(_ handle: (String, inout BenchArguments) throws -> Bool) throws {
        while index < arguments.count {
            let flag = arguments[index]
            guard try handle(flag, &self) else { throw BenchUsageError(message: "unknown option \"\(flag)\"") }
            index += 1
        }
    }

    /// The value after the current flag.
    mutating func value(_ flag: String) throws -> String {
        index += 1
        guard index < arguments.count else { throw BenchUsageError(message: "\(flag) needs a value") }
        return arguments[index]
    }

    /// The whole-number value after the current flag, within `range`.
    mutating func number(_ flag: String, _ range: ClosedRange<Int>) throws -> Int {
        let text = try value(flag)
        guard let number = Int(text), range.contains(number) else {
            throw BenchUsageError(message: "\(flag) \(text): must be a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return number
    }
}
