import CounterCore
import RedisDriver

/// The format of a write-behind log entry. The shard writes it, the flusher, the post inspector
/// and dead letters read it.
///
/// **Packed (written since format 2).** One entry per slot per batch (split above
/// `maximumChangesPerEntry`), one field `c` whose value lists the changes grouped by post, each
/// post's changes in decision order: `<post>` then `+<user>` (liked) or `-<user>` (not liked) per
/// change, groups separated by a space — `42+7+9-7 43+1` is user 7 liking post 42, user 9 liking
/// it, user 7 taking it back, user 1 liking post 43. A reaction of another kind than `like` is
/// grouped by post *and kind*, the kind after a colon: `42:love+7 42-7` is user 7's love of
/// post 42 and the end of the like it replaced (a deployment of likes only never writes one, so
/// its entries are what they always were). Order between groups carries no meaning (a change
/// only ever follows earlier changes of its own pair and kind); order within a group does. An
/// entry is applied whole, in one transaction, so the log's progress (its newest entry applied)
/// stays exact across crashes — and a `one`-per-user switch of kinds, whose two changes one
/// entry holds, reaches PostgreSQL as one step.
///
/// **One change per entry (format 1).** Fields `u` (user), `p` (post), `l` (`1` liked, `0` not),
/// and, only for a change whose acknowledgement is not the entry's own time (a dead letter, a
/// replayed one), `t` (Unix milliseconds), and for a kind other than `like`, `k` (its name).
/// Every entry had this form before format 2, so entries
/// an older version left in a log are read as before (an older reader ignores `t`); a batch's
/// single change for a slot is still written so (Redis keeps it smaller than a packed entry of
/// one), and dead letters keep this form (one letter per change).
///
/// **When a change was acknowledged.** A stream entry's id is the time Redis appended it, in
/// Unix milliseconds: for a change written by its batch, its acknowledgement (the answer goes
/// out after the write). The flusher writes that time to `likes.created_at`/`updated_at`, so a
/// like keeps the time it was made however late PostgreSQL gets it; a change with `t` keeps `t`.
public enum ChangeLogEntry {
    /// The field of a packed entry.
    public static let packedField = "c"
    /// Most changes one packed entry carries: a slot's batch with more is written as several
    /// entries, so a flush can take a log in bounded steps.
    public static let maximumChangesPerEntry = 1_000

    /// `XADD <log> * c <packed changes>`; a single change in the one-change form
    /// (`XADD <log> * u <user> p <post> l <0|1>`), which Redis keeps smaller: a stream stores
    /// field names once per node and small integers as integers (36 bytes per change against 46
    /// for a packed entry of one, measured with `counter-bench scale`).
    /// - Precondition: `changes` is not empty.
    /// - Precondition: no change carries a time of its own, or `changes` is that one change
    ///   (`entryRuns` splits them so).
    public static func append<Changes: Collection>(_ changes: Changes, to log: String) -> RedisCommand where Changes.Element == LikeChange {
        if changes.count == 1, let change = changes.first { return .xadd(log, fields: fields(of: change)) }
        return .xadd(log, fields: [(packedField, pack(changes))])
    }

    /// `changes` (in decision order) as the runs of entries that keep each change's time: runs
    /// of changes without a time of their own, each written as one entry (packed), and every
    /// change with one (`acknowledgedAt`) alone, in the one-change form with `t`. Order within
    /// a pair is kept: the runs follow decision order.
    public static func entryRuns(_ changes: [LikeChange]) -> [ArraySlice<LikeChange>] {
        guard changes.contains(where: { $0.acknowledgedAt != nil }) else { return [changes[...]] }
        var runs: [ArraySlice<LikeChange>] = []
        var start = changes.startIndex
        for index in changes.indices where changes[index].acknowledgedAt != nil {
            if start < index { runs.append(changes[start..<index]) }
            runs.append(changes[index...index])
            start = index + 1
        }
        if start < changes.endIndex { runs.append(changes[start...]) }
        return runs
    }

    /// The packed text of `changes` (see the type's description).
    public static func pack<Changes: Collection>(_ changes: Changes) -> [UInt8] where Changes.Element == LikeChange {
        var groupOrder: [PostKind] = []
        var byGroup: [PostKind: [LikeChange]] = [:]
        for change in changes {
            let group = PostKind(postID: change.postID, kind: change.kind)
            if byGroup[group] == nil { groupOrder.append(group) }
            byGroup[group, default: []].append(change)
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(changes.count * 9 + groupOrder.count * 8)
        for (index, group) in groupOrder.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: " ")) }
            DecimalText.append(group.postID, to: &bytes)
            if !group.kind.isLike {
                bytes.append(UInt8(ascii: ":"))
                bytes.append(contentsOf: group.kind.name.utf8)
            }
            for change in byGroup[group]! {
                bytes.append(change.liked ? UInt8(ascii: "+") : UInt8(ascii: "-"))
                DecimalText.append(change.userID, to: &bytes)
            }
        }
        return bytes
    }

    /// The changes a packed value lists, in its order; `nil` unless every group is a positive
    /// post id, optionally `:` and a kind other than `like`, then at least one `+`/`-` and a
    /// positive user id.
    public static func unpack<Bytes: Collection>(_ bytes: Bytes) -> [LikeChange]? where Bytes.Element == UInt8 {
        var changes: [LikeChange] = []
        var post: Int64 = 0
        var kind = ReactionKind.like
        var kindBytes: [UInt8] = []
        var number: Int64 = 0
        var digits = 0
        var reading = PackedReading.post
        var changesInGroup = 0
        /// Ends the number or kind being read; `false` when it is not a valid one.
        func finish() -> Bool {
            switch reading {
            case .kind:
                guard let named = ReactionKind(bytes: kindBytes), !named.isLike else { return false }
                kind = named
                kindBytes.removeAll(keepingCapacity: true)
                return true
            case .post, .user:
                guard digits > 0, number > 0 else { return false }
                if case .user(let liked) = reading {
                    changes.append(LikeChange(userID: number, postID: post, kind: kind, liked: liked))
                    changesInGroup += 1
                } else {
                    post = number
                    kind = .like
                    changesInGroup = 0
                }
                number = 0
                digits = 0
                return true
            }
        }
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                if case .kind = reading {
                    kindBytes.append(byte)
                    guard kindBytes.count <= ReactionKind.maximumNameLength else { return nil }
                    continue
                }
                let (times10, overflow1) = number.multipliedReportingOverflow(by: 10)
                let (sum, overflow2) = times10.addingReportingOverflow(Int64(byte &- UInt8(ascii: "0")))
                guard !overflow1, !overflow2 else { return nil }
                number = sum
                digits += 1
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "_"):
                guard case .kind = reading else { return nil }
                kindBytes.append(byte)
                guard kindBytes.count <= ReactionKind.maximumNameLength else { return nil }
            case UInt8(ascii: ":"):
                guard case .post = reading, finish() else { return nil }
                reading = .kind
            case UInt8(ascii: "+"), UInt8(ascii: "-"):
                guard finish() else { return nil }
                reading = .user(liked: byte == UInt8(ascii: "+"))
            case UInt8(ascii: " "):
                guard case .user = reading, finish() else { return nil }
                reading = .post
            default:
                return nil
            }
        }
        guard case .user = reading, finish(), changesInGroup > 0 else { return nil }
        return changes
    }

    /// What `unpack` is reading.
    private enum PackedReading {
        case post
        case kind
        /// A user who holds the kind (`true`) or does not.
        case user(liked: Bool)
    }

    /// The changes an entry records, in log order, in either format; `nil` when it is neither.
    public static func changes(from entry: StreamEntry) -> [LikeChange]? {
        if let packed = entry.fields[packedField] {
            guard entry.fields.count == 1 else { return nil }
            return unpack(packed)
        }
        return change(from: entry).map { [$0] }
    }

    /// The fields of `change` in the one-change form, for streams that carry single changes
    /// (dead letters).
    public static func fields(of change: LikeChange) -> [(String, RedisArgument)] {
        var fields: [(String, RedisArgument)] = [("u", change.userID), ("p", change.postID), ("l", change.liked ? "1" : "0")]
        if !change.kind.isLike { fields.append(("k", change.kind.name)) }
        if let at = change.acknowledgedAt { fields.append(("t", at)) }
        return fields
    }

    /// The change an entry of the one-change form records (a dead letter, or a log entry
    /// written before format 2), or `nil` when the entry is not one.
    public static func change(from entry: StreamEntry) -> LikeChange? {
        guard let user = entry.integer("u"), user > 0, let post = entry.integer("p"), post > 0 else { return nil }
        var at: Int64?
        if entry.fields["t"] != nil {
            guard let time = entry.integer("t"), time > 0, LikeChange.acknowledgementRange.contains(time) else { return nil }
            at = time
        }
        var kind = ReactionKind.like
        if let name = entry.fields["k"] {
            guard let named = ReactionKind(bytes: name), !named.isLike else { return nil }
            kind = named
        }
        switch entry.fields["l"] {
        case [UInt8(ascii: "1")]: return LikeChange(userID: user, postID: post, kind: kind, liked: true, acknowledgedAt: at)
        case [UInt8(ascii: "0")]: return LikeChange(userID: user, postID: post, kind: kind, liked: false, acknowledgedAt: at)
        default: return nil
        }
    }
}
