import Foundation

/// Seeded random and mutated input for the parsers that read what clients, peers and Redis send
/// (each module's fuzz tests). The inputs per parser default to what a debug build runs in a few
/// seconds; set `COUNTER_FUZZ_INPUTS` (for example 1000000) for a longer run.
public enum FuzzInput {
    /// `COUNTER_FUZZ_INPUTS` when set to a positive number, else `defaultCount`.
    public static func count(_ defaultCount: Int) -> Int {
        configured ?? defaultCount
    }

    private static let configured: Int? = {
        guard let text = ProcessInfo.processInfo.environment["COUNTER_FUZZ_INPUTS"], let value = Int(text), value > 0 else { return nil }
        return value
    }()

    /// Bytes that matter to the parsers: digits, separators, escapes, signs, control bytes.
    public static let alphabet: [UInt8] = Array("0123456789/%+-. \t\r\n{}[],:\"\\eE_aZ".utf8) + [0, 0x7F, 0x80, 0xC3, 0xFF]

    /// `seed` with one to four random mutations: a byte replaced, inserted or deleted, a range
    /// repeated, or the end cut.
    public static func mutate(_ seed: [UInt8], _ random: inout SeededGenerator) -> [UInt8] {
        var bytes = seed
        for _ in 0..<Int.random(in: 1...4, using: &random) {
            let position = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &random)
            switch Int.random(in: 0..<5, using: &random) {
            case 0 where !bytes.isEmpty: bytes[position] = alphabet.randomElement(using: &random)!
            case 1: bytes.insert(alphabet.randomElement(using: &random)!, at: min(position, bytes.count))
            case 2 where !bytes.isEmpty: bytes.remove(at: position)
            case 3 where !bytes.isEmpty:
                let end = min(bytes.count, position + Int.random(in: 1...8, using: &random))
                bytes.insert(contentsOf: bytes[position..<end], at: end)
            default: bytes = Array(bytes.prefix(position))
            }
        }
        return bytes
    }
}
