import CounterCore
import Persistence

/// A list's cursor: opaque to clients, a keyset inside — which list (a post's likers or a
/// user's likes, and whose), and the position of the last item given (`LikeLists.Position`:
/// its time in microseconds and its id). A cursor of another list, or one that is not a cursor
/// at all, is refused (`400 invalid_cursor`). Pure.
struct ListCursor: Equatable {
    let kind: LikeLists.Kind
    /// The post (likers) or user (likes) whose list it is.
    let owner: Int64
    let after: LikeLists.Position

    /// The cursor as sent: base64url (no padding) of `l.<post>.<µs>.<user>` or `u.<user>.<µs>.<post>`.
    var text: String {
        Base64URL.encode(Array("\(kind == .likers ? "l" : "u").\(owner).\(after.microseconds).\(after.id)".utf8))
    }

    /// The cursor `text` names, if it is one of `kind`'s list of `owner`.
    static func parse(_ text: String, kind: LikeLists.Kind, owner: Int64) throws(ListCursorError) -> ListCursor {
        guard !text.isEmpty, text.utf8.count <= 128, let bytes = Base64URL.decode(text.utf8) else { throw .malformed }
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0].count == 1,
            let tag = parts[0].first, tag == UInt8(ascii: "l") || tag == UInt8(ascii: "u"),
            let listOwner = EntityID.parse(bytes: parts[1]),
            let microseconds = DecimalText.parse(parts[2]), Self.microseconds.contains(microseconds),
            let id = EntityID.parse(bytes: parts[3])
        else { throw .malformed }
        guard (tag == UInt8(ascii: "l")) == (kind == .likers), listOwner == owner else { throw .foreign }
        return ListCursor(kind: kind, owner: owner, after: LikeLists.Position(microseconds: microseconds, id: id))
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
