/// A path's segments (between the `/`s after the first), found in one scan of its bytes and read
/// in place: matching a route allocates nothing. At most `capacity` segments are told apart; the
/// last holds the rest of a longer path.
struct PathSegments {
    static let capacity = 9

    private let bytes: UnsafeBufferPointer<UInt8>
    /// Where segment `i` starts is `starts[i]`; it ends one byte before `starts[i + 1]` (the
    /// path's end counts as a start after a `/`).
    private var starts: (Int, Int, Int, Int, Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    private(set) var count = 0

    /// The segments of `bytes`, a path that starts with `/`.
    init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
        setStart(0, 1)
        count = 1
        var index = 1
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "/") && count < Self.capacity {
                setStart(count, index + 1)
                count += 1
            }
            index += 1
        }
        setStart(count, bytes.count + 1)
    }

    /// The bytes of segment `index`.
    func segment(_ index: Int) -> UnsafeBufferPointer<UInt8> {
        let start = start(index)
        return UnsafeBufferPointer(rebasing: bytes[start..<(self.start(index + 1) - 1)])
    }

    /// Whether segment `index` is `literal`.
    func segment(_ index: Int, is literal: [UInt8]) -> Bool {
        let start = start(index)
        guard self.start(index + 1) - 1 - start == literal.count else { return false }
        return literal.withUnsafeBufferPointer { expected in
            UnsafeBufferPointer(rebasing: bytes[start..<(start + expected.count)]).elementsEqual(expected)
        }
    }

    private func start(_ index: Int) -> Int {
        withUnsafeBytes(of: starts) { $0.load(fromByteOffset: index * MemoryLayout<Int>.stride, as: Int.self) }
    }

    private mutating func setStart(_ index: Int, _ value: Int) {
        withUnsafeMutableBytes(of: &starts) { $0.storeBytes(of: value, toByteOffset: index * MemoryLayout<Int>.stride, as: Int.self) }
    }
}
