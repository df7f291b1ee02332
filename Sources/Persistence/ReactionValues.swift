import CounterCore
import RedisDriver

/// How Redis values spell the reactions of other kinds than `like` (`RedisKeyLayout.reactions`,
/// `reactionCounts` and the values of `warmMembers`). Pure.
///
/// - A user's other kinds: their names, sorted, joined by commas (`love,tada`).
/// - A warm post's user: `1` (likes it) or `0` (does not), as in a deployment of likes only,
///   then, when the user holds other kinds, a colon and those kinds (`0:love`, `1:love,tada`).
public enum ReactionValues {
    /// `kinds` (sorted, none `like`) as one value.
    public static func kindsValue(_ kinds: [ReactionKind]) -> String {
        kinds.count == 1 ? kinds[0].name : kinds.map(\.name).joined(separator: ",")
    }

    /// The kinds a value lists, sorted; `nil` unless it is one or more valid names other than
    /// `like`, each once.
    public static func kinds<Bytes: Collection>(_ bytes: Bytes) -> [ReactionKind]? where Bytes.Element == UInt8 {
        if !bytes.contains(UInt8(ascii: ",")) {
            // The common case: one kind.
            guard let kind = ReactionKind(bytes: bytes), !kind.isLike else { return nil }
            return [kind]
        }
        var kinds: [ReactionKind] = []
        for part in bytes.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
            guard let kind = ReactionKind(bytes: part), !kind.isLike else { return nil }
            kinds.append(kind)
        }
        kinds.sort()
        for index in kinds.indices.dropFirst() where kinds[index] == kinds[index - 1] { return nil }
        return kinds.isEmpty ? nil : kinds
    }

    /// A warm post's value for a user who likes it or not and holds `others`.
    public static func warmValue(liked: Bool, others: [ReactionKind]) -> String {
        guard !others.isEmpty else { return liked ? "1" : "0" }
        return (liked ? "1:" : "0:") + kindsValue(others)
    }

    /// What a warm post's value says: whether the user likes it, and the other kinds held;
    /// `nil` for a value of no such form.
    public static func warmMembership<Bytes: Collection>(_ bytes: Bytes) -> (liked: Bool, others: [ReactionKind])? where Bytes.Element == UInt8 {
        guard let first = bytes.first, first == UInt8(ascii: "0") || first == UInt8(ascii: "1") else { return nil }
        let liked = first == UInt8(ascii: "1")
        let rest = bytes.dropFirst()
        if rest.isEmpty { return (liked, []) }
        guard rest.first == UInt8(ascii: ":"), let others = kinds(rest.dropFirst()) else { return nil }
        return (liked, others)
    }

    /// The counts an `HGETALL` of `reactionCounts` lists; `nil` for a reply of another shape
    /// (a field that is not a kind other than `like`, a count that is not above zero).
    public static func counts(_ reply: RedisReply) -> [ReactionKind: Int64]? {
        guard let items = reply.array, items.count % 2 == 0 else { return nil }
        var counts: [ReactionKind: Int64] = [:]
        var index = 0
        while index < items.count {
            guard case .bulkString(let name) = items[index], let kind = ReactionKind(bytes: name), !kind.isLike,
                let count = items[index + 1].integer, count > 0
            else { return nil }
            counts[kind] = count
            index += 2
        }
        return counts
    }
}
