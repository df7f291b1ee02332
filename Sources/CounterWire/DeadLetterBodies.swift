/// A change PostgreSQL refused for good (its post was deleted), or a log entry that could not be
/// read: its id in the dead-letter stream and its fields — `u`, `p`, `l` (user, post, liked
/// `1`/`0`), `reason`, `log` and `entry` (where it came from), `at` (milliseconds since 1970),
/// or `raw` for an unreadable entry. On the wire, one flat object: `{"id":"…","at":"…",…}`,
/// fields in name order.
public struct DeadLetter: Sendable, Equatable, Codable {
    public var id: String
    public var fields: [String: String]

    public var reason: String? { fields["reason"] }

    public init(id: String, fields: [String: String]) {
        self.id = id
        self.fields = fields
    }

    private struct FieldKey: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { return nil }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: FieldKey.self)
        id = try container.decode(String.self, forKey: FieldKey(stringValue: "id"))
        var fields: [String: String] = [:]
        for key in container.allKeys where key.stringValue != "id" {
            fields[key.stringValue] = try container.decode(String.self, forKey: key)
        }
        self.fields = fields
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: FieldKey.self)
        try container.encode(id, forKey: FieldKey(stringValue: "id"))
        for (name, value) in fields.sorted(by: { $0.key < $1.key }) where name != "id" {
            try container.encode(value, forKey: FieldKey(stringValue: name))
        }
    }
}

/// Dead-letter ids are stream entry ids: milliseconds, a dash, a sequence (`1700000000000-0`).
public enum DeadLetterID {
    /// Whether `text` has that shape.
    public static func isValid(_ text: String) -> Bool {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        return parts.count == 2
            && parts.allSatisfy { part in
                !part.isEmpty && part.count <= 20 && part.utf8.allSatisfy { $0 >= 48 && $0 <= 57 } && UInt64(part) != nil
            }
    }
}

/// The answer of `GET /admin/dead-letters`.
public struct DeadLetterList: Sendable, Equatable, Codable {
    public var deadLetters: [DeadLetter]

    public init(deadLetters: [DeadLetter]) {
        self.deadLetters = deadLetters
    }

    enum CodingKeys: String, CodingKey { case deadLetters = "dead_letters" }
}

/// The body of `POST /admin/dead-letters/replay` (`{"ids":["…"]}`; no body for all) and of
/// `POST /admin/dead-letters/drop` (ids required).
public struct DeadLetterSelection: Sendable, Equatable, Codable {
    public var ids: [String]?

    public init(ids: [String]?) {
        self.ids = ids
    }

    enum CodingKeys: String, CodingKey, CaseIterable { case ids }

    public init(from decoder: any Decoder) throws {
        try UnknownMembers.refuse(in: decoder, allowed: CodingKeys.allCases)
        ids = try decoder.container(keyedBy: CodingKeys.self).decodeUnlessAbsent([String].self, forKey: .ids)
    }

    /// An absent `ids` is left out (`{}`); a request's `null` is refused, see `init(from:)`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        if let ids { try container.encode(ids, forKey: .ids) }
    }
}

/// The answer of `POST /admin/dead-letters/replay`: what went back into the write path, what a
/// later change of the same pair had superseded (removed, nothing written), and what failed again
/// (those letters stay).
public struct ReplayResult: Sendable, Equatable, Codable {
    public struct Failure: Sendable, Equatable, Codable {
        public var id: String
        public var reason: String

        public init(id: String, reason: String) {
            self.id = id
            self.reason = reason
        }
    }

    public var replayed: [String]
    public var superseded: [String]
    public var failed: [Failure]

    public init(replayed: [String], superseded: [String] = [], failed: [Failure]) {
        self.replayed = replayed
        self.superseded = superseded
        self.failed = failed
    }

    enum CodingKeys: String, CodingKey { case replayed, superseded, failed }

    /// A node from before `superseded` existed leaves it out: read as none.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        replayed = try container.decode([String].self, forKey: .replayed)
        superseded = try container.decodeIfPresent([String].self, forKey: .superseded) ?? []
        failed = try container.decode([Failure].self, forKey: .failed)
    }
}

/// The answer of `POST /admin/dead-letters/drop`: how many of the letters named were there.
public struct DropResult: Sendable, Equatable, Codable {
    public var dropped: Int

    public init(dropped: Int) {
        self.dropped = dropped
    }
}
