import CounterCore
import CounterWire

/// The feed query's body read by hand: feed pages come thousands of times per second, where
/// Foundation's decoder (with the checks that give an id's place in an error) cost a quarter of
/// the route's throughput in the bench. Only the plain shape is read here —
/// `{"post_ids":[1,2,3],"user_id":7}`, members in either order, any whitespace; anything else
/// (escapes, fractions, signs, duplicates, unknown members, invalid JSON) returns `nil`, and the
/// caller decodes the body with `WireDecoder`, which accepts or refuses it with the precise
/// reason. A test holds the two to the same answers.
enum HotRequests {
    static func feedQuery(_ body: [UInt8]) -> FeedQuery? {
        guard let (postIDs, userID) = feedMembers(body), let userID else { return nil }
        return FeedQuery(postIDs: postIDs, userID: userID)
    }

    /// An end user's feed query: `user_id` may be left out (the token names the user).
    static func ownFeedQuery(_ body: [UInt8]) -> OwnFeedQuery? {
        guard let (postIDs, userID) = feedMembers(body) else { return nil }
        return OwnFeedQuery(postIDs: postIDs, userID: userID)
    }

    private static func feedMembers(_ body: [UInt8]) -> ([Int64], Int64?)? {
        var reader = Reader(bytes: body)
        var postIDs: [Int64]?
        var userID: Int64?
        guard reader.take(UInt8(ascii: "{")) else { return nil }
        repeat {
            guard let key = reader.plainKey(), reader.take(UInt8(ascii: ":")) else { return nil }
            switch key {
            case "post_ids" where postIDs == nil:
                guard let ids = reader.integerArray() else { return nil }
                postIDs = ids
            case "user_id" where userID == nil:
                guard let id = reader.integer() else { return nil }
                userID = id
            default:
                return nil
            }
        } while reader.take(UInt8(ascii: ","))
        guard reader.take(UInt8(ascii: "}")), reader.atEnd, let postIDs else { return nil }
        return (postIDs, userID)
    }

    private struct Reader {
        let bytes: [UInt8]
        var index = 0

        init(bytes: [UInt8]) {
            self.bytes = bytes
        }

        var atEnd: Bool {
            mutating get {
                skipSpace()
                return index == bytes.count
            }
        }

        mutating func skipSpace() {
            while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 {
                index += 1
            }
        }

        /// Takes `byte` after any whitespace.
        mutating func take(_ byte: UInt8) -> Bool {
            skipSpace()
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        /// A member name of lowercase letters and underscores, without escapes.
        mutating func plainKey() -> String? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            let start = index
            while index < bytes.count, (bytes[index] >= 0x61 && bytes[index] <= 0x7A) || bytes[index] == UInt8(ascii: "_") {
                index += 1
            }
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\""), index > start else { return nil }
            defer { index += 1 }
            return String(decoding: bytes[start..<index], as: UTF8.self)
        }

        /// A non-negative integer in plain JSON digits (no sign, fraction, exponent or leading
        /// zero) that fits 64 bits.
        mutating func integer() -> Int64? {
            skipSpace()
            let start = index
            while index < bytes.count, bytes[index] >= 0x30 && bytes[index] <= 0x39 { index += 1 }
            let digits = bytes[start..<index]
            guard !digits.isEmpty, digits.count <= 19, digits.count == 1 || digits.first != 0x30 else { return nil }
            // A fraction or exponent follows: not a plain integer.
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") || bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                return nil
            }
            return DecimalText.parse(digits)
        }

        mutating func integerArray() -> [Int64]? {
            guard take(UInt8(ascii: "[")) else { return nil }
            var values: [Int64] = []
            if take(UInt8(ascii: "]")) { return values }
            repeat {
                guard let value = integer() else { return nil }
                values.append(value)
            } while take(UInt8(ascii: ","))
            return take(UInt8(ascii: "]")) ? values : nil
        }
    }
}
