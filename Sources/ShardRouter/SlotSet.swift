/// A set of the 16,384 slots (`HashSlot.count`), one bit each: which slots a set of answers
/// covered, say, to know that none was left out. Pure.
public struct SlotSet: Sendable, Equatable {
    private var words = [UInt64](repeating: 0, count: HashSlot.count / 64)

    /// The empty set.
    public init() {}

    /// The slots of `ranges` (slot numbers; parts outside `0..<HashSlot.count` are ignored).
    public init(ranges: [ClosedRange<Int>]) {
        for range in ranges { insert(range) }
    }

    /// Adds `slot`; a number not below `HashSlot.count` is ignored.
    public mutating func insert(_ slot: Int) {
        guard slot >= 0 && slot < HashSlot.count else { return }
        words[slot >> 6] |= 1 << UInt64(slot & 63)
    }

    /// Adds the slots of `range` that exist.
    public mutating func insert(_ range: ClosedRange<Int>) {
        let lower = max(range.lowerBound, 0)
        let upper = min(range.upperBound, HashSlot.count - 1)
        guard lower <= upper else { return }
        for slot in lower...upper { insert(slot) }
    }

    /// Adds every slot of `other`.
    public mutating func formUnion(_ other: SlotSet) {
        for index in words.indices { words[index] |= other.words[index] }
    }

    /// Whether `slot` is in the set.
    public func contains(_ slot: Int) -> Bool {
        slot >= 0 && slot < HashSlot.count && words[slot >> 6] & (1 << UInt64(slot & 63)) != 0
    }

    /// The lowest slot not in the set; `nil` when every slot is.
    public var firstMissing: Int? {
        guard let index = words.firstIndex(where: { $0 != .max }) else { return nil }
        return index * 64 + (~words[index]).trailingZeroBitCount
    }

    /// The slots as contiguous ranges, in ascending order (as `GET /v1/cluster` gives a node's).
    public var ranges: [ClosedRange<Int>] {
        var ranges: [ClosedRange<Int>] = []
        var start: Int?
        for slot in 0...HashSlot.count {
            let member = slot < HashSlot.count && contains(slot)
            if member, start == nil { start = slot }
            if !member, let first = start {
                ranges.append(first...(slot - 1))
                start = nil
            }
        }
        return ranges
    }
}
