/// One liker of a post: who, and when they liked it (`{"user_id":7,"liked_at":"2026-12-04T05:12:33.123Z"}`).
public struct Liker: Sendable, Hashable, Codable {
    public let userID: Int64
    /// When the like was acknowledged: RFC 3339, UTC, with milliseconds (`LikeTime`).
    public let likedAt: String

    public init(userID: Int64, likedAt: String) {
        self.userID = userID
        self.likedAt = likedAt
    }

    enum CodingKeys: String, CodingKey {
        case userID = "user_id"
        case likedAt = "liked_at"
    }
}

/// A page of a post's likers, newest first: the answer of `GET /v1/posts/{post}/likers`
/// (`{"post_id":1,"likes_count":1234,"likers":[…],"next_cursor":"…"}`). `next_cursor` is `null`
/// on the last page; pass it as `cursor` for the next.
public struct LikersPage: Sendable, Hashable, Codable {
    public let postID: Int64
    public let likesCount: Int64
    public let likers: [Liker]
    public let nextCursor: String?

    public init(postID: Int64, likesCount: Int64, likers: [Liker], nextCursor: String?) {
        self.postID = postID
        self.likesCount = likesCount
        self.likers = likers
        self.nextCursor = nextCursor
    }

    enum CodingKeys: String, CodingKey {
        case postID = "post_id"
        case likesCount = "likes_count"
        case likers
        case nextCursor = "next_cursor"
    }
}

/// One post a user liked, and when (`{"post_id":42,"liked_at":"2026-12-04T05:12:33.123Z"}`).
public struct LikedPost: Sendable, Hashable, Codable {
    public let postID: Int64
    /// When the like was acknowledged: RFC 3339, UTC, with milliseconds (`LikeTime`).
    public let likedAt: String

    public init(postID: Int64, likedAt: String) {
        self.postID = postID
        self.likedAt = likedAt
    }

    enum CodingKeys: String, CodingKey {
        case postID = "post_id"
        case likedAt = "liked_at"
    }
}

/// A page of the posts a user liked, newest first: the answer of `GET /v1/users/{user}/likes`
/// and `GET /v1/me/likes` (`{"user_id":7,"likes":[…],"next_cursor":"…"}`).
public struct UserLikesPage: Sendable, Hashable, Codable {
    public let userID: Int64
    public let likes: [LikedPost]
    public let nextCursor: String?

    public init(userID: Int64, likes: [LikedPost], nextCursor: String?) {
        self.userID = userID
        self.likes = likes
        self.nextCursor = nextCursor
    }

    enum CodingKeys: String, CodingKey {
        case userID = "user_id"
        case likes
        case nextCursor = "next_cursor"
    }
}

/// The times of the lists: RFC 3339 in UTC with milliseconds (`2026-12-04T05:12:33.123Z`), to
/// and from Unix milliseconds. Pure (no calendar, no locale).
public enum LikeTime {
    /// `milliseconds` since 1970 (from year 1 to 9999) as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    public static func text(milliseconds: Int64) -> String {
        let (days, inDay) = floorDivision(milliseconds, 86_400_000)
        let (year, month, day) = civil(fromDays: days)
        let hours = inDay / 3_600_000
        let minutes = inDay / 60_000 % 60
        let seconds = inDay / 1000 % 60
        let millis = inDay % 1000
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(hours, 2)):\(pad(minutes, 2)):\(pad(seconds, 2)).\(pad(millis, 3))Z"
    }

    /// The Unix milliseconds of a `text(milliseconds:)` string; `nil` for anything else.
    public static func milliseconds(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count == 24, bytes[4] == 45, bytes[7] == 45, bytes[10] == 84, bytes[13] == 58, bytes[16] == 58,
            bytes[19] == 46, bytes[23] == 90
        else { return nil }
        func number(_ range: Range<Int>) -> Int64? {
            var value: Int64 = 0
            for byte in bytes[range] {
                guard byte >= 48 && byte <= 57 else { return nil }
                value = value * 10 + Int64(byte - 48)
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10), let hours = number(11..<13),
            let minutes = number(14..<16), let seconds = number(17..<19), let millis = number(20..<23),
            (1...12).contains(month), day >= 1, hours < 24, minutes < 60, seconds < 60
        else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        guard civil(fromDays: days) == (year, month, day) else { return nil }
        return ((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000 + millis
    }

    private static func pad(_ value: Int64, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }

    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> (Int64, Int64) {
        let quotient = value >= 0 ? value / divisor : (value - divisor + 1) / divisor
        return (quotient, value - quotient * divisor)
    }

    /// Howard Hinnant's `civil_from_days`: the proleptic Gregorian date of a day since 1970-01-01.
    private static func civil(fromDays days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// Its inverse, `days_from_civil`.
    private static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}

/// The changes of one user that a node acknowledged and PostgreSQL may not have yet: the answer
/// of `GET /v1/users/{user}/likes/pending`, which the node answering a user's likes asks of
/// every other node of a cluster (`{"user_id":7,"pending":[{"post_id":42,"liked":true,"at_ms":1764825153123}],"slots":[[0,5461]]}`).
/// `slots` are the slots whose changes the answer holds (those the node serves), as ranges: the
/// asker checks that the answers together cover every slot.
public struct PendingLikesBody: Sendable, Hashable, Codable {
    /// One change: the post, the membership it left, when it was acknowledged (Unix milliseconds),
    /// and for a reaction of another kind than `like`, its kind (absent for a like, so a
    /// deployment of likes only sends what it always sent).
    public struct Change: Sendable, Hashable, Codable {
        public let postID: Int64
        public let liked: Bool
        public let atMilliseconds: Int64
        /// The kind's name; `nil` for `like`.
        public let kind: String?

        public init(postID: Int64, liked: Bool, atMilliseconds: Int64, kind: String? = nil) {
            self.postID = postID
            self.liked = liked
            self.atMilliseconds = atMilliseconds
            self.kind = kind
        }

        enum CodingKeys: String, CodingKey {
            case postID = "post_id"
            case liked
            case atMilliseconds = "at_ms"
            case kind
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            postID = try container.decode(Int64.self, forKey: .postID)
            liked = try container.decode(Bool.self, forKey: .liked)
            atMilliseconds = try container.decode(Int64.self, forKey: .atMilliseconds)
            kind = try container.decodeIfPresent(String.self, forKey: .kind)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(postID, forKey: .postID)
            try container.encode(liked, forKey: .liked)
            try container.encode(atMilliseconds, forKey: .atMilliseconds)
            if let kind { try container.encode(kind, forKey: .kind) }
        }
    }

    public let userID: Int64
    public let pending: [Change]
    /// Contiguous ranges of slot numbers, `[first, last]` each.
    public let slots: [[Int]]

    public init(userID: Int64, pending: [Change], slots: [[Int]]) {
        self.userID = userID
        self.pending = pending
        self.slots = slots
    }

    enum CodingKeys: String, CodingKey {
        case userID = "user_id"
        case pending, slots
    }
}
