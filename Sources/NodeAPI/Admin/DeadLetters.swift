import Persistence
import WritePath

/// A dead letter's id (its entry id in the stream).
typealias LetterID = DeadLetterStream.LetterID

/// The dead-letter stream for operators: list, replay (apply again through the write path, then
/// remove), drop.
struct DeadLetters: Sendable {
    typealias Letter = DeadLetterStream.Letter

    struct ReplayOutcome: Sendable, Equatable {
        var replayed: [LetterID] = []
        /// Refused letters whose pair a later change settled otherwise (the user's latest wish
        /// stands): removed, nothing written.
        var superseded: [LetterID] = []
        /// Letters that failed again, with why; they stay in the stream.
        var failed: [(LetterID, String)] = []

        static func == (lhs: ReplayOutcome, rhs: ReplayOutcome) -> Bool {
            lhs.replayed == rhs.replayed && lhs.superseded == rhs.superseded && lhs.failed.map(\.0) == rhs.failed.map(\.0)
        }
    }

    let service: CounterService
    let stream: DeadLetterStream

    func list(count: Int) async throws -> [Letter] {
        try await stream.list(count: min(max(count, 1), 10_000))
    }

    /// Applies the letters `ids` (or all, up to 10,000) again; removes each one that succeeds.
    ///
    /// A letter of a missing post goes through the write path as a like or unlike: its post's
    /// keys were dropped with it, so the post loads afresh from PostgreSQL. A change PostgreSQL
    /// refused (the letter has `sqlstate`) is still the membership in Redis, so it is logged
    /// again as it is (`confirmLike`/`confirmUnlike`) for the flusher to apply in order with
    /// everything else; if the membership is no longer the letter's, a later change settled the
    /// pair and the letter is superseded.
    func replay(ids: [LetterID]?) async throws -> ReplayOutcome {
        let letters = try await list(count: 10_000).filter { ids == nil || ids!.contains($0.id) }
        // The operator may have just restored the posts: do not trust the memory that they are gone.
        await service.recheckExistence(of: Array(Set(letters.compactMap { $0.change?.postID })))
        var outcome = ReplayOutcome()
        for letter in letters {
            guard let change = letter.change else {
                outcome.failed.append((letter.id, "the letter holds no change (u, p, l)"))
                continue
            }
            // The change keeps when it was first acknowledged.
            let acknowledgedAt = letter.acknowledgedAt
            do {
                if letter.fields["sqlstate"] != nil {
                    let state = try await service.perform(
                        change.liked ? .confirmLike : .confirmUnlike, post: change.postID, user: change.userID, kind: change.kind,
                        acknowledgedAt: acknowledgedAt)
                    try await stream.remove([letter.id])
                    // Whether the user holds the letter's kind now: `like` is the like; another
                    // kind is among the summary's kinds of the user.
                    let holds = change.kind.isLike ? state.isLiked : state.reactionSummary.mine.contains(change.kind)
                    if holds == change.liked { outcome.replayed.append(letter.id) } else { outcome.superseded.append(letter.id) }
                } else {
                    _ = try await service.perform(
                        change.liked ? .like : .unlike, post: change.postID, user: change.userID, kind: change.kind,
                        acknowledgedAt: acknowledgedAt)
                    try await stream.remove([letter.id])
                    outcome.replayed.append(letter.id)
                }
            } catch {
                outcome.failed.append((letter.id, "\(error)"))
            }
        }
        return outcome
    }

    /// Removes the letters `ids`; returns how many were there.
    func drop(ids: [LetterID]) async throws -> Int {
        guard !ids.isEmpty else { return 0 }
        return try await stream.remove(ids)
    }
}
