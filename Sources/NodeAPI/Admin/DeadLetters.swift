import Persistence
import RedisDriver
import WritePath

/// The dead-letter stream for operators: list, replay (apply again through the write path, then
/// remove), drop.
struct DeadLetters: Sendable {
    struct Letter: Sendable, Equatable {
        let id: StreamEntryID
        let fields: [String: String]
        /// The change the letter carries (fields `u`, `p`, `l`, as in the write-behind log).
        let change: LikeChange?
    }

    struct ReplayOutcome: Sendable, Equatable {
        var replayed: [StreamEntryID] = []
        /// Refused letters whose pair a later change settled otherwise (the user's latest wish
        /// stands): removed, nothing written.
        var superseded: [StreamEntryID] = []
        /// Letters that failed again, with why; they stay in the stream.
        var failed: [(StreamEntryID, String)] = []

        static func == (lhs: ReplayOutcome, rhs: ReplayOutcome) -> Bool {
            lhs.replayed == rhs.replayed && lhs.superseded == rhs.superseded && lhs.failed.map(\.0) == rhs.failed.map(\.0)
        }
    }

    let service: CounterService
    let redis: RedisClient
    let layout: RedisKeyLayout

    func list(count: Int) async throws -> [Letter] {
        let entries = try await redis.send(.xrange(layout.deadLetters, count: min(max(count, 1), 10_000)), slot: layout.deadLettersSlot).streamEntries()
        return entries.map { entry in
            Letter(id: entry.id, fields: entry.fields.mapValues { String(decoding: $0, as: UTF8.self) },
                   change: ChangeLogEntry.change(from: entry))
        }
    }

    /// Applies the letters `ids` (or all, up to 10,000) again; removes each one that succeeds.
    ///
    /// A letter of a missing post goes through the write path as a like or unlike: its post's
    /// keys were dropped with it, so the post loads afresh from PostgreSQL. A change PostgreSQL
    /// refused (the letter has `sqlstate`) is still the membership in Redis, so it is logged
    /// again as it is (`confirmLike`/`confirmUnlike`) for the flusher to apply in order with
    /// everything else; if the membership is no longer the letter's, a later change settled the
    /// pair and the letter is superseded.
    func replay(ids: [StreamEntryID]?) async throws -> ReplayOutcome {
        let letters = try await list(count: 10_000).filter { ids == nil || ids!.contains($0.id) }
        // The operator may have just restored the posts: do not trust the memory that they are gone.
        await service.recheckExistence(of: Array(Set(letters.compactMap { $0.change?.postID })))
        var outcome = ReplayOutcome()
        for letter in letters {
            guard let change = letter.change else {
                outcome.failed.append((letter.id, "the letter holds no change (u, p, l)"))
                continue
            }
            // The change keeps when it was first acknowledged: its `t`, or (a letter written
            // before letters carried it) the time of the log entry it was read from.
            let acknowledgedAt = change.acknowledgedAt
                ?? letter.fields["entry"].flatMap { StreamEntryID($0) }.map { Int64(clamping: $0.milliseconds) }
            do {
                if letter.fields["sqlstate"] != nil {
                    let state = try await service.perform(change.liked ? .confirmLike : .confirmUnlike, post: change.postID, user: change.userID,
                                                          acknowledgedAt: acknowledgedAt)
                    try await redis.send(.xdel(layout.deadLetters, ids: [letter.id]), slot: layout.deadLettersSlot)
                    if state.isLiked == change.liked { outcome.replayed.append(letter.id) } else { outcome.superseded.append(letter.id) }
                } else {
                    _ = try await service.perform(change.liked ? .like : .unlike, post: change.postID, user: change.userID,
                                                  acknowledgedAt: acknowledgedAt)
                    try await redis.send(.xdel(layout.deadLetters, ids: [letter.id]), slot: layout.deadLettersSlot)
                    outcome.replayed.append(letter.id)
                }
            } catch {
                outcome.failed.append((letter.id, "\(error)"))
            }
        }
        return outcome
    }

    /// Removes the letters `ids`; returns how many were there.
    func drop(ids: [StreamEntryID]) async throws -> Int {
        guard !ids.isEmpty else { return 0 }
        return Int(try await redis.send(.xdel(layout.deadLetters, ids: ids), slot: layout.deadLettersSlot).integer ?? 0)
    }
}
