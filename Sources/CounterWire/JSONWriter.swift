
import CounterCore

/// Writes compact JSON straight into bytes. The node's hot answers (likes, counts, feed pages,
/// errors) are written with it directly — they are tiny, and Foundation's `JSONEncoder` is slow
/// on Linux — and `WireEncoder` writes every other body through it, so both agree byte for byte.
public struct JSONWriter {
    public private(set) var bytes: [UInt8] = []
    private var needsComma = false

    public init(capacity: Int = 96) {
        bytes.reserveCapacity(capacity)
    }

    public mutating func objectStart() { separator(); bytes.append(UInt8(ascii: "{")); needsComma = false }
    public mutating func objectEnd() { bytes.append(UInt8(ascii: "}")); needsComma = true }
    public mutating func arrayStart() { separator(); bytes.append(UInt8(ascii: "[")); needsComma = false }
    public mutating func arrayEnd() { bytes.append(UInt8(ascii: "]")); needsComma = true }

    public mutating func key(_ name: String) {
        separator()
        appendString(name)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    public mutating func field(_ name: String, _ value: String) { key(name); separator(); appendString(value); needsComma = true }
    public mutating func field(_ name: String, _ number: Int64) { key(name); value(number) }
    public mutating func field(_ name: String, _ value: Int) { key(name); self.value(Int64(value)) }
    public mutating func field(_ name: String, _ value: Bool) { key(name); separator(); bytes.append(contentsOf: (value ? "true" : "false").utf8); needsComma = true }
    public mutating func field(_ name: String, _ value: Double) {
        key(name)
        separator()
        bytes.append(contentsOf: (value.isFinite ? String(value) : "null").utf8)
        needsComma = true
    }
    public mutating func nullField(_ name: String) { key(name); separator(); bytes.append(contentsOf: "null".utf8); needsComma = true }

    public mutating func value(_ value: Int64) {
        separator()
        DecimalText.append(value, to: &bytes)
        needsComma = true
    }

    public mutating func value(_ value: String) { separator(); appendString(value); needsComma = true }

    public mutating func value(_ value: UInt64) {
        separator()
        bytes.append(contentsOf: String(value).utf8)
        needsComma = true
    }

    public mutating func value(_ value: Bool) { separator(); bytes.append(contentsOf: (value ? "true" : "false").utf8); needsComma = true }

    public mutating func value(_ value: Double) {
        separator()
        bytes.append(contentsOf: (value.isFinite ? String(value) : "null").utf8)
        needsComma = true
    }

    public mutating func nullValue() { separator(); bytes.append(contentsOf: "null".utf8); needsComma = true }

    private mutating func separator() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
    }

    private mutating func appendString(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [92, 34])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [92, 92])
            case 0x0A: bytes.append(contentsOf: [92, UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [92, UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [92, UInt8(ascii: "t")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [92, UInt8(ascii: "u"), 48, 48, hex[Int(byte >> 4)], hex[Int(byte & 15)]])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
