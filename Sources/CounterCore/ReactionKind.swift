/// A kind of reaction a user can leave on a post: `like`, `love`, `tada`, a custom emoji's
/// shortcode. A name is 1 to 32 characters of `a`–`z`, `0`–`9` and `_`.
///
/// `like` is a kind like any other, with one difference that keeps apps working: its truth is
/// the `likes` rows and `posts.likes_count` (every other kind's is `reactions` and
/// `reaction_counts`), and its Redis keys are the ones a like always had.
public struct ReactionKind: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The name, valid by construction.
    public let name: String
    /// FNV-1a of the name's bytes, computed once: hashing a kind (every pending change is
    /// indexed by one) combines this word instead of hashing the string, and unequal kinds
    /// are told apart without comparing names.
    private let code: UInt64

    /// The kind `like`.
    public static let like = ReactionKind(unchecked: "like")

    /// Longest name a kind may have.
    public static let maximumNameLength = 32

    /// The kind `name` names, or `nil` when it is not 1–32 characters of `[a-z0-9_]`.
    public init?<Name: StringProtocol>(_ name: Name) {
        guard let kind = Self(bytes: name.utf8) else { return nil }
        self = kind
    }

    /// The kind the ASCII bytes name, or `nil` (the same rules as `init(_:)`).
    public init?<Bytes: Collection>(bytes: Bytes) where Bytes.Element == UInt8 {
        guard Self.isValidName(bytes) else { return nil }
        self.name = String(decoding: bytes, as: UTF8.self)
        self.code = Self.code(of: bytes)
    }

    private init(unchecked name: String) {
        self.name = name
        self.code = Self.code(of: name.utf8)
    }

    private static func code<Bytes: Collection>(of bytes: Bytes) -> UInt64 where Bytes.Element == UInt8 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        return hash
    }

    private static let likeCode = ReactionKind.like.code

    public static func == (lhs: ReactionKind, rhs: ReactionKind) -> Bool {
        lhs.code == rhs.code && lhs.name == rhs.name
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
    }

    /// Whether `bytes` is a valid name: 1–32 bytes of `[a-z0-9_]`.
    public static func isValidName<Bytes: Collection>(_ bytes: Bytes) -> Bool where Bytes.Element == UInt8 {
        guard !bytes.isEmpty, bytes.count <= maximumNameLength else { return false }
        return bytes.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: "_")
        }
    }

    /// Whether this is `like`, whose truth is the `likes` table.
    public var isLike: Bool { code == Self.likeCode && name == "like" }

    public var description: String { name }

    public static func < (lhs: ReactionKind, rhs: ReactionKind) -> Bool { lhs.name < rhs.name }
}
