import CounterCore
import Persistence

/// A list's cursor: opaque to clients, a keyset inside — which list (a post's likers or holders
/// of a kind, a user's likes or reactions, and whose), and the position of the last item given (`LikeLists.Position`:
/// its time in microseconds and its id). A cursor of another list, or one that is not a cursor
/// at all, is refused (`400 invalid_cursor`). Pure.
struct ListCursor: Equatable {
    let kind: LikeLists.Kind
    /// The post (likers) or user (likes) whose list it is.
    let owner: Int64
    let after: LikeLists.Position
    /// For a post's users holding another kind than `like` (a `likers` list of that kind); `nil`:
    /// the likers.
    var reactionKind: ReactionKind? = nil

    /// The cursor as sent: base64url (no padding) of `l.<post>.<µs>.<user>`, `u.<user>.<µs>.<post>`,
    /// for another kind's holders `r.<post>.<kind>.<µs>.<user>`, for a user's reactions
    /// `k.<user>.<µs>.<post>.<kind>`.
    var text: String {
        if kind == .reactions {
            return Base64URL.encode(Array("k.\(owner).\(after.microseconds).\(after.id).\(after.kind)".utf8))
        }
        if let reactionKind, !reactionKind.isLike {
            return Base64URL.encode(Array("r.\(owner).\(reactionKind.name).\(after.microseconds).\(after.id)".utf8))
        }
        return Base64URL.encode(Array("\(kind == .likers ? "l" : "u").\(owner).\(after.microseconds).\(after.id)".utf8))
    }

    /// The cursor `text` names, if it is one of `kind`'s list of `owner` (of `reactionKind`'s
    /// holders, for a post's list of another kind than `like`).
    static func parse(
        _ text: String, kind: LikeLists.Kind, owner: Int64, reactionKind: ReactionKind = .like
    ) throws(ListCursorError) -> ListCursor {
        guard !text.isEmpty, text.utf8.count <= 128, let bytes = Base64URL.decode(text.utf8) else { throw .malformed }
        var parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        if parts.first?.elementsEqual([UInt8(ascii: "k")]) == true {
            guard parts.count == 5, let listOwner = EntityID.parse(bytes: parts[1]),
                let microseconds = DecimalText.parse(parts[2]), Self.microseconds.contains(microseconds),
                let id = EntityID.parse(bytes: parts[3]), let itemKind = ReactionKind(bytes: parts[4])
            else { throw .malformed }
            guard kind == .reactions, listOwner == owner else { throw .foreign }
            return ListCursor(kind: kind, owner: owner, after: LikeLists.Position(microseconds: microseconds, id: id, kind: itemKind.name))
        }
        var named: ReactionKind?
        if parts.first?.elementsEqual([UInt8(ascii: "r")]) == true {
            guard parts.count == 5, let kind = ReactionKind(bytes: parts[2]), !kind.isLike else { throw .malformed }
            named = kind
            parts.remove(at: 2)
        }
        guard parts.count == 4, parts[0].count == 1,
            let tag = parts[0].first, tag == UInt8(ascii: "l") || tag == UInt8(ascii: "u") || tag == UInt8(ascii: "r"),
            let listOwner = EntityID.parse(bytes: parts[1]),
            let microseconds = DecimalText.parse(parts[2]), Self.microseconds.contains(microseconds),
            let id = EntityID.parse(bytes: parts[3])
        else { throw .malformed }
        let listed = named ?? .like
        guard kind != .reactions, (tag != UInt8(ascii: "u")) == (kind == .likers), listOwner == owner, listed == reactionKind else {
            throw .foreign
        }
        return ListCursor(
            kind: kind, owner: owner, after: LikeLists.Position(microseconds: microseconds, id: id),
            reactionKind: reactionKind.isLike ? nil : reactionKind)
    }

    /// The times a cursor can hold: those a like can have (`LikeChange.acknowledgementRange`),
    /// in microseconds.
    static let microseconds: ClosedRange<Int64> =
        LikeChange.acknowledgementRange.lowerBound * 1000...LikeChange.acknowledgementRange.upperBound * 1000 + 999
}

/// Why a cursor was refused.
enum ListCursorError: Error, Equatable {
    /// Not a cursor this service made.
    case malformed
    /// A cursor of another list.
    case foreign
}
