import CounterWire
import NodeHTTP
import Persistence

/// `GET /v1/events?after=N&limit=L&wait=S`: the change events committed after id `N`, oldest
/// first, from the outbox every flush writes with events on. A consumer that keeps its
/// `next_after` gets every event at least once, in commit order (ids follow commits), until
/// retention prunes what it has not read: then `410 events_pruned`, never a silent gap.
struct EventFeedAnswers: Sendable {
    let events: LikeEvents
    let watch: EventWatch
    /// Whether the deployment has other kinds than `like`: then every event names its kind.
    var reactions = false

    /// The arguments: `after` (0 or an id given before; default 0: from the oldest kept),
    /// `limit` (1–1,000, default 100), `wait` (0–60 s, default 0: answer at once).
    struct Arguments: Equatable {
        static let defaultLimit = 100
        static let maximumLimit = 1_000
        static let maximumWaitSeconds = 60

        var after: Int64 = 0
        var limit = defaultLimit
        var waitSeconds = 0

        /// The arguments of `query` (as sent, nothing percent-decoded); any other is refused.
        init(_ query: [String: String]) throws(RequestError) {
            try QueryArguments.refuseUnknown(query, known: ["after", "limit", "wait"], route: "/v1/events")
            if let text = query["after"] {
                guard let value = QueryArguments.wholeNumber(text, in: 0...Int64.max) else {
                    throw RequestError(
                        code: .invalidArgument, message: "after \"\(text)\" is not an event id (a whole number, 0 for the oldest kept)")
                }
                after = value
            }
            if let text = query["limit"] {
                guard let value = QueryArguments.wholeNumber(text, in: 1...Int64(Self.maximumLimit)) else {
                    throw RequestError(code: .invalidArgument, message: "limit \"\(text)\" is not a whole number from 1 to \(Self.maximumLimit)")
                }
                limit = Int(value)
            }
            if let text = query["wait"] {
                guard let value = QueryArguments.wholeNumber(text, in: 0...Int64(Self.maximumWaitSeconds)) else {
                    throw RequestError(
                        code: .invalidArgument, message: "wait \"\(text)\" is not a whole number of seconds from 0 to \(Self.maximumWaitSeconds)")
                }
                waitSeconds = Int(value)
            }
        }
    }

    /// The page for `arguments`, waiting up to `wait` seconds for a first event when there is
    /// none yet; `410 events_pruned` when events after `after` were pruned, `400` when `after`
    /// is beyond the newest event (a cursor of another database).
    func page(_ arguments: Arguments) async throws -> HTTPResponse {
        var (events, clock) = try await read(arguments)
        if let refusal = Self.refusal(arguments.after, events, clock) { return refusal }
        if events.isEmpty && arguments.waitSeconds > 0 {
            await watch.wait(after: arguments.after, until: .now + .seconds(arguments.waitSeconds))
            (events, clock) = try await read(arguments)
            if let refusal = Self.refusal(arguments.after, events, clock) { return refusal }
        }
        return .json(
            EventsPage(
                events: events.map { Self.body($0, reactions: reactions) }, nextAfter: events.last?.id ?? arguments.after,
                newestID: max(clock.lastID, events.last?.id ?? 0)))
    }

    /// The events, then the clock: read in this order, a prune between the two shows as events
    /// that do not start right after `after` while the clock says some were pruned.
    private func read(_ arguments: Arguments) async throws -> ([LikeEvents.Event], LikeEvents.Clock) {
        let page = try await events.read(after: arguments.after, limit: arguments.limit)
        return (page, try await events.clock())
    }

    static func refusal(_ after: Int64, _ events: [LikeEvents.Event], _ clock: LikeEvents.Clock) -> HTTPResponse? {
        // 0 starts at the oldest kept, whatever was pruned before.
        if after > 0 && after < clock.prunedThrough && events.first?.id != after + 1 {
            return .error(
                .eventsPruned,
                message: "events \(after + 1)-\(clock.prunedThrough) were pruned by retention before this consumer read them; "
                    + "the oldest kept is \(clock.prunedThrough + 1): resume from after=\(clock.prunedThrough) and reconcile what was missed")
        }
        if after > clock.lastID {
            return .error(
                .invalidArgument,
                message: "after \(after) is beyond the newest event, \(clock.lastID): a cursor of another database? Start again from after=0")
        }
        return nil
    }

    /// The event's body; with `reactions`, naming its kind (`like` for a row of `likes`, whose
    /// events store none) and the kind a switch replaced.
    static func body(_ event: LikeEvents.Event, reactions: Bool = false) -> ChangeEvent {
        ChangeEvent(
            id: event.id, postID: event.postID, userID: event.userID, liked: event.liked,
            likedAt: LikeTime.text(milliseconds: milliseconds(event.likedAtMicroseconds)),
            committedAt: LikeTime.text(milliseconds: milliseconds(event.committedAtMicroseconds)),
            kind: reactions ? event.kind ?? "like" : nil, replacedKind: reactions ? event.replacedKind : nil)
    }

    private static func milliseconds(_ micros: Int64) -> Int64 { micros >= 0 ? micros / 1000 : (micros - 999) / 1000 }
}
