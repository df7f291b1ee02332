/// Base64url without padding (RFC 7515 §2): the encoding of a JWT's three parts and of the lists' cursors. Pure.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let values: [Int8] = {
        var table = [Int8](repeating: -1, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = Int8(index) }
        return table
    }()

    /// The bytes `text` encodes, or `nil` when it is not canonical unpadded base64url: a byte
    /// outside the alphabet (`+`, `/`, `=`, whitespace), a length of 4n+1, or unused low bits set.
    public static func decode<Bytes: Collection>(_ text: Bytes) -> [UInt8]? where Bytes.Element == UInt8 {
        guard text.count % 4 != 1 else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(text.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in text {
            let value = values[Int(byte)]
            guard value >= 0 else { return nil }
            accumulator = (accumulator << 6) | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // What is left over must be zero bits, or two encodings would name the same bytes.
        guard accumulator & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return output
    }

    /// `bytes` in unpadded base64url.
    public static func encode<Bytes: Collection>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count * 4 + 2) / 3)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in bytes {
            accumulator = (accumulator << 8) | UInt32(byte)
            bits += 8
            while bits >= 6 {
                bits -= 6
                output.append(alphabet[Int((accumulator >> UInt32(bits)) & 63)])
            }
        }
        if bits > 0 { output.append(alphabet[Int((accumulator << UInt32(6 - bits)) & 63)]) }
        return String(decoding: output, as: UTF8.self)
    }
}
