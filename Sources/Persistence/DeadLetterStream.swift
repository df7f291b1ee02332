import RedisDriver

/// The dead-letter stream (`RedisKeyLayout.deadLetters`) as operators see it: its letters, oldest
/// first, and their removal. The write path writes them (a change PostgreSQL did not take, or a
/// log entry that could not be read), with their fields as in the write-behind log
/// (`ChangeLogEntry`).
public struct DeadLetterStream: Sendable {
    /// A letter's id: its entry id in the stream (the Redis driver's `StreamEntryID`, named here so
    /// a module above storage names it without importing a driver).
    public typealias LetterID = StreamEntryID

    /// One letter: its entry id, its fields as text, and the change it carries.
    public struct Letter: Sendable, Equatable {
        public let id: LetterID
        public let fields: [String: String]
        /// The change the letter carries (fields `u`, `p`, `l` and `t`, as in the write-behind
        /// log); `nil` when it carries none (an entry that could not be read).
        public let change: LikeChange?

        public init(id: LetterID, fields: [String: String], change: LikeChange?) {
            self.id = id
            self.fields = fields
            self.change = change
        }

        /// When the letter's change was first acknowledged (Unix milliseconds): its `t`, or —
        /// for a letter written before letters carried it — the time of the log entry it was
        /// read from (field `entry`); `nil` when neither is there.
        public var acknowledgedAt: Int64? {
            change?.acknowledgedAt ?? fields["entry"].flatMap { StreamEntryID($0) }.map { Int64(clamping: $0.milliseconds) }
        }
    }

    private let redis: RedisClient
    private let layout: RedisKeyLayout

    /// The stream of `layout`, through `redis`.
    public init(redis: RedisClient, layout: RedisKeyLayout) {
        self.redis = redis
        self.layout = layout
    }

    /// The oldest `count` letters, oldest first.
    public func list(count: Int) async throws -> [Letter] {
        let entries = try await redis.send(.xrange(layout.deadLetters, count: count), slot: layout.deadLettersSlot).streamEntries()
        return entries.map { entry in
            Letter(
                id: entry.id, fields: entry.fields.mapValues { String(decoding: $0, as: UTF8.self) },
                change: ChangeLogEntry.change(from: entry))
        }
    }

    /// Removes the letters `ids`; returns how many were there.
    /// - Precondition: `ids` is not empty.
    @discardableResult
    public func remove(_ ids: [LetterID]) async throws -> Int {
        Int(try await redis.send(.xdel(layout.deadLetters, ids: ids), slot: layout.deadLettersSlot).integer ?? 0)
    }
}
