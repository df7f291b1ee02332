/// The optimistic state of one like button (one user, one post), as pure logic: the button shows
/// the user's latest wish at once, the service is told the *wanted state* (never a blind toggle),
/// taps during a request are coalesced, answers never undo a newer tap, and failures roll back
/// to what the service last confirmed.
///
/// The owner (`LikeButtonModel`, or anything else) sends each `Request` it gets back and reports
/// the outcome with `receive(_:for:)`. At most one request is in flight at a time.
public struct LikeStateMachine: Sendable, Equatable {
    /// What the service confirmed: the user's like and the post's count.
    public struct Confirmed: Sendable, Equatable {
        public var isLiked: Bool
        public var likesCount: Int64

        public init(isLiked: Bool, likesCount: Int64) {
            self.isLiked = isLiked
            self.likesCount = likesCount
        }
    }

    /// A request for the owner to send.
    public struct Request: Sendable, Equatable {
        public enum Kind: Sendable, Equatable {
            /// Make the service's state this (`PUT`/`DELETE` of the like: idempotent).
            case setLiked(Bool)
            /// Read the service's state (`GET`): after a failure whose effect is unknown.
            case refresh
        }

        public let id: Int
        public let kind: Kind
    }

    /// What the user should feel: a success, or a failure that rolled the button back.
    public enum Event: Sendable, Equatable {
        /// The service confirmed the state the user wants.
        case succeeded(Confirmed)
        /// A request failed; the button shows the last confirmed state again.
        case failed(CounterClientError)
    }

    /// The last state the service confirmed.
    public private(set) var confirmed: Confirmed
    /// The state the user asked for last — what the button shows.
    public private(set) var wanted: Bool
    /// The request being sent, if any.
    public private(set) var inFlight: Request?
    private var nextID = 1
    /// Whether the user tapped since a failure left the service's state unknown: the refresh
    /// that follows then keeps the user's wish instead of adopting the service's state.
    private var tappedSinceUncertainty = false

    public init(isLiked: Bool, likesCount: Int64) {
        confirmed = Confirmed(isLiked: isLiked, likesCount: likesCount)
        wanted = isLiked
    }

    /// Whether the button shows a like.
    public var isLiked: Bool { wanted }

    /// The count the button shows: the confirmed count, moved by one when the user's wish differs
    /// from the confirmed state.
    public var likesCount: Int64 {
        guard wanted != confirmed.isLiked else { return confirmed.likesCount }
        return max(0, confirmed.likesCount + (wanted ? 1 : -1))
    }

    /// Whether a request is in flight.
    public var isBusy: Bool { inFlight != nil }

    /// A tap: flips the shown state at once. Returns the request to send, or `nil` while one is
    /// in flight (its answer decides whether one more is needed).
    public mutating func tap() -> Request? {
        want(!wanted)
    }

    /// Asks for a state directly (a double-tap that only likes, say).
    public mutating func want(_ liked: Bool) -> Request? {
        wanted = liked
        tappedSinceUncertainty = true
        guard inFlight == nil, wanted != confirmed.isLiked else { return nil }
        return start(.setLiked(wanted))
    }

    /// A state the service reported outside this button's requests (a feed page). Taken only
    /// while nothing is in flight; a request's own answer is fresher.
    public mutating func serverReported(_ state: Confirmed) {
        guard inFlight == nil else { return }
        confirmed = state
        wanted = state.isLiked
    }

    /// The outcome of request `id`. Returns the next request to send (at most one), and the event
    /// for the user, if any. Answers to anything but the request in flight are ignored.
    public mutating func receive(_ result: Result<Confirmed, CounterClientError>, for id: Int) -> (next: Request?, event: Event?) {
        guard let request = inFlight, request.id == id else { return (nil, nil) }
        inFlight = nil
        switch (result, request.kind) {
        case (.success(let state), .setLiked):
            confirmed = state
            if wanted != state.isLiked { return (start(.setLiked(wanted)), nil) }
            return (nil, .succeeded(state))
        case (.success(let state), .refresh):
            confirmed = state
            if !tappedSinceUncertainty { wanted = state.isLiked }
            if wanted != state.isLiked { return (start(.setLiked(wanted)), nil) }
            return (nil, nil)
        case (.failure(let error), .setLiked):
            wanted = confirmed.isLiked
            guard error.outcomeUnknown else { return (nil, .failed(error)) }
            // The change may have been applied: ask what the service holds now.
            tappedSinceUncertainty = false
            return (start(.refresh), .failed(error))
        case (.failure(let error), .refresh):
            // Still unknown; show the last confirmed state. A tap made meanwhile is lost: say so.
            let lostTap = wanted != confirmed.isLiked
            wanted = confirmed.isLiked
            return (nil, lostTap ? .failed(error) : nil)
        }
    }

    private mutating func start(_ kind: Request.Kind) -> Request {
        let request = Request(id: nextID, kind: kind)
        nextID += 1
        inFlight = request
        return request
    }
}
