/// One of the 16,384 logical slots posts are spread over; the same slots Redis Cluster uses.
///
/// A post's slot is the Redis Cluster slot of its decimal id (CRC-16 of the digits, modulo
/// 16,384), so `HashSlot(post:)` agrees with `CLUSTER KEYSLOT <post id>`. Ownership of posts
/// moves between shards and nodes by whole slots.
public struct HashSlot: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Number of logical slots: 16,384, as in Redis Cluster.
    public static let count = 16_384

    /// The slot number, in `0..<HashSlot.count`.
    public let rawValue: UInt16

    /// A slot from its number; `nil` when it is not below `HashSlot.count`.
    public init?(rawValue: UInt16) {
        guard Int(rawValue) < HashSlot.count else { return nil }
        self.rawValue = rawValue
    }

    /// The slot of a post: CRC-16 of its decimal id, modulo 16,384. The digits are written into a
    /// buffer on the stack, not into a `String`: every key of a post needs its slot.
    public init(post postID: Int64) {
        // 24 bytes hold the longest id, "-9223372036854775808".
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        let crc = withUnsafeMutableBytes(of: &digits) { buffer -> UInt16 in
            var index = buffer.count
            var magnitude = postID.magnitude
            repeat {
                index -= 1
                buffer[index] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            if postID < 0 {
                index -= 1
                buffer[index] = UInt8(ascii: "-")
            }
            return CRC16.checksum(UnsafeRawBufferPointer(rebasing: buffer[index...]))
        }
        self.rawValue = crc & UInt16(HashSlot.count - 1)
    }

    /// The slot Redis Cluster gives a key whose hash tag (or whole text) is `key`.
    public init<Bytes: Sequence>(key: Bytes) where Bytes.Element == UInt8 {
        self.rawValue = CRC16.checksum(key) & UInt16(HashSlot.count - 1)
    }

    public static func < (lhs: HashSlot, rhs: HashSlot) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String { "slot \(rawValue)" }

    /// A short hash tag (the text between `{` and `}` in a Redis key) that Redis Cluster maps to
    /// this slot, so every key of the slot can be written atomically on one cluster node.
    public var hashTag: String { HashTagTable.tags[Int(rawValue)] }
}

/// For every slot, the shortest lowercase-letter string whose CRC-16 lands in it, found once.
enum HashTagTable {
    static let tags: [String] = {
        var tags = [String?](repeating: nil, count: HashSlot.count)
        var remaining = HashSlot.count
        let letters = Array("abcdefghijklmnopqrstuvwxyz".utf8)
        var candidate: [UInt8] = []
        // Enumerate a, b, …, z, aa, ab, … until every slot has a tag.
        while remaining > 0 {
            increment(&candidate, alphabet: letters)
            let slot = Int(HashSlot(key: candidate).rawValue)
            if tags[slot] == nil {
                tags[slot] = String(decoding: candidate, as: UTF8.self)
                remaining -= 1
            }
        }
        return tags.map { $0! }
    }()

    private static func increment(_ word: inout [UInt8], alphabet: [UInt8]) {
        var index = word.count - 1
        while index >= 0 {
            let position = alphabet.firstIndex(of: word[index])!
            if position + 1 < alphabet.count {
                word[index] = alphabet[position + 1]
                return
            }
            word[index] = alphabet[0]
            index -= 1
        }
        word.insert(alphabet[0], at: 0)
    }
}
