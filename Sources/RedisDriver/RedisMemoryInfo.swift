/// A Redis node's memory, as `INFO memory` reports it. Pure.
public struct RedisMemoryInfo: Sendable, Equatable {
    /// `used_memory`: bytes Redis has allocated for its data and itself.
    public let usedBytes: Int
    /// `maxmemory`; `nil` when it is 0 (no limit).
    public let maximumBytes: Int?

    public init(usedBytes: Int, maximumBytes: Int?) {
        self.usedBytes = usedBytes
        self.maximumBytes = maximumBytes
    }

    /// Reads the `field:value` lines of `INFO memory`; `nil` without `used_memory`.
    public static func parse(_ text: String) -> RedisMemoryInfo? {
        var used: Int?
        var maximum: Int?
        for line in text.split(whereSeparator: \.isNewline) {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let value = Int(line[line.index(after: colon)...])
            switch line[..<colon] {
            case "used_memory": used = value
            case "maxmemory": maximum = value
            default: break
            }
        }
        guard let used else { return nil }
        return RedisMemoryInfo(usedBytes: used, maximumBytes: (maximum ?? 0) > 0 ? maximum : nil)
    }
}
