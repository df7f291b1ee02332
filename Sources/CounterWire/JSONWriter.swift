import CounterCore

/// Writes compact JSON straight into bytes. The node's hot answers (likes, counts, feed pages,
/// errors) are written with it directly — they are tiny, and Foundation's `JSONEncoder` is slow
/// on Linux — and `WireEncoder` writes every other body through it, so both agree byte for byte.
public struct JSONWriter {
    /// The JSON written so far.
    @inlinable public var bytes: [UInt8] { storage }
    @usableFromInline var storage: [UInt8] = []
    @usableFromInline var needsComma = false

    @inlinable public init(capacity: Int = 96) {
        storage.reserveCapacity(capacity)
    }

    @inlinable public mutating func objectStart() {
        separator()
        storage.append(UInt8(ascii: "{"))
        needsComma = false
    }
    @inlinable public mutating func objectEnd() {
        storage.append(UInt8(ascii: "}"))
        needsComma = true
    }
    @inlinable public mutating func arrayStart() {
        separator()
        storage.append(UInt8(ascii: "["))
        needsComma = false
    }
    @inlinable public mutating func arrayEnd() {
        storage.append(UInt8(ascii: "]"))
        needsComma = true
    }

    @inlinable public mutating func key(_ name: String) {
        separator()
        appendString(name)
        storage.append(UInt8(ascii: ":"))
        needsComma = false
    }

    @inlinable public mutating func field(_ name: String, _ value: String) {
        key(name)
        separator()
        appendString(value)
        needsComma = true
    }
    @inlinable public mutating func field(_ name: String, _ number: Int64) {
        key(name)
        value(number)
    }
    @inlinable public mutating func field(_ name: String, _ value: Int) {
        key(name)
        self.value(Int64(value))
    }
    @inlinable public mutating func field(_ name: String, _ value: Bool) {
        key(name)
        separator()
        storage.append(contentsOf: (value ? "true" : "false").utf8)
        needsComma = true
    }
    @inlinable public mutating func field(_ name: String, _ value: Double) {
        key(name)
        separator()
        storage.append(contentsOf: (value.isFinite ? String(value) : "null").utf8)
        needsComma = true
    }
    @inlinable public mutating func nullField(_ name: String) {
        key(name)
        separator()
        storage.append(contentsOf: "null".utf8)
        needsComma = true
    }

    @inlinable public mutating func value(_ value: Int64) {
        separator()
        DecimalText.append(value, to: &storage)
        needsComma = true
    }

    @inlinable public mutating func value(_ value: String) {
        separator()
        appendString(value)
        needsComma = true
    }

    @inlinable public mutating func value(_ value: UInt64) {
        separator()
        storage.append(contentsOf: String(value).utf8)
        needsComma = true
    }

    @inlinable public mutating func value(_ value: Bool) {
        separator()
        storage.append(contentsOf: (value ? "true" : "false").utf8)
        needsComma = true
    }

    @inlinable public mutating func value(_ value: Double) {
        separator()
        storage.append(contentsOf: (value.isFinite ? String(value) : "null").utf8)
        needsComma = true
    }

    @inlinable public mutating func nullValue() {
        separator()
        storage.append(contentsOf: "null".utf8)
        needsComma = true
    }

    @usableFromInline mutating func separator() {
        if needsComma { storage.append(UInt8(ascii: ",")) }
    }

    @usableFromInline mutating func appendString(_ text: String) {
        storage.append(UInt8(ascii: "\""))
        // Most strings written (member names, kinds, times) need no escape: copied whole.
        let copied: Bool? = text.utf8.withContiguousStorageIfAvailable { bytes in
            guard !bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else { return false }
            storage.append(contentsOf: bytes)
            return true
        }
        if copied == true {
            storage.append(UInt8(ascii: "\""))
            return
        }
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): storage.append(contentsOf: [92, 34])
            case UInt8(ascii: "\\"): storage.append(contentsOf: [92, 92])
            case 0x0A: storage.append(contentsOf: [92, UInt8(ascii: "n")])
            case 0x0D: storage.append(contentsOf: [92, UInt8(ascii: "r")])
            case 0x09: storage.append(contentsOf: [92, UInt8(ascii: "t")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                storage.append(contentsOf: [92, UInt8(ascii: "u"), 48, 48, hex[Int(byte >> 4)], hex[Int(byte & 15)]])
            default: storage.append(byte)
            }
        }
        storage.append(UInt8(ascii: "\""))
    }
}
