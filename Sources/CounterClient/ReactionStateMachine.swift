/// The optimistic state of one reaction picker (one user, one post), as pure logic, the way
/// `LikeStateMachine` is for a like button: the picker shows the user's latest wish at once, the
/// service is told wanted states (`PUT`/`DELETE` of a kind, idempotent — never a blind toggle),
/// taps during a request are coalesced, answers never undo a newer tap, and failures roll back to
/// what the service last confirmed.
///
/// With one kind per user (`.one`), choosing a kind while holding another is one step: one `PUT`
/// of the new kind, which the service takes as a replacement, and the picker moves both counts at
/// once. With many (`.many`), each kind is its own toggle, and a wish that differs from the
/// service in several kinds is sent a kind at a time. At most one request is in flight.
public struct ReactionStateMachine: Sendable, Equatable {
    /// How many kinds a user may hold of a post (the deployment's `--reactions-per-user`).
    public enum Mode: Sendable, Equatable {
        case one, many
    }

    /// What the service confirmed: the user's kinds and every kind's count.
    public struct Confirmed: Sendable, Equatable {
        public var mine: Set<String>
        public var counts: [String: Int64]

        public init(mine: Set<String>, counts: [String: Int64]) {
            self.mine = mine
            self.counts = counts
        }
    }

    /// A request for the owner to send.
    public struct Request: Sendable, Equatable {
        public enum Kind: Sendable, Equatable {
            /// Make the service's state of `kind` this (`PUT` when `true`, `DELETE` when not).
            case set(kind: String, reacted: Bool)
            /// Read the service's state (`GET`): after a failure whose effect is unknown.
            case refresh
        }

        public let id: Int
        public let kind: Kind
    }

    /// What the user should feel.
    public enum Event: Sendable, Equatable {
        /// The service confirmed the state the user wants.
        case succeeded(Confirmed)
        /// A request failed; the picker shows the last confirmed state again.
        case failed(CounterClientError)
    }

    public let mode: Mode
    /// The last state the service confirmed.
    public private(set) var confirmed: Confirmed
    /// The kinds the user asked for last — what the picker shows as the user's.
    public private(set) var wanted: Set<String>
    /// The request being sent, if any.
    public private(set) var inFlight: Request?
    private var nextID = 1
    /// Whether the user tapped since a failure left the service's state unknown.
    private var tappedSinceUncertainty = false

    public init(mode: Mode, mine: Set<String>, counts: [String: Int64]) {
        self.mode = mode
        confirmed = Confirmed(mine: mine, counts: counts)
        wanted = mine
    }

    /// The user's kinds, as the picker shows them, by name.
    public var mine: [String] { wanted.sorted() }

    /// The count the picker shows for `kind`: the confirmed one, moved by the user's wish where it
    /// differs from the confirmed state.
    public func count(of kind: String) -> Int64 {
        var count = confirmed.counts[kind] ?? 0
        if wanted.contains(kind) && !confirmed.mine.contains(kind) { count += 1 }
        if !wanted.contains(kind) && confirmed.mine.contains(kind) { count -= 1 }
        return max(0, count)
    }

    /// Every kind with a shown count above zero, the largest first (equal counts by name).
    public var counts: [(kind: String, count: Int64)] {
        Set(confirmed.counts.keys).union(wanted).map { ($0, count(of: $0)) }.filter { $0.1 > 0 }
            .sorted { $0.1 != $1.1 ? $0.1 > $1.1 : $0.0 < $1.0 }
    }

    /// The shown total of every kind.
    public var total: Int64 { counts.reduce(0) { $0 + $1.count } }

    /// Whether a request is in flight.
    public var isBusy: Bool { inFlight != nil }

    /// A tap on `kind`: with one kind per user, it becomes the user's only kind (or none, tapped
    /// again); with many, it flips. Returns the request to send, or `nil` while one is in flight.
    public mutating func tap(_ kind: String) -> Request? {
        var kinds = wanted
        switch mode {
        case .one: kinds = kinds == [kind] ? [] : [kind]
        case .many: if kinds.remove(kind) == nil { kinds.insert(kind) }
        }
        return want(kinds)
    }

    /// Asks for a set of kinds directly (with one kind per user, at most one is kept: the
    /// smallest name, so the same wish always keeps the same kind).
    public mutating func want(_ kinds: Set<String>) -> Request? {
        wanted = mode == .one ? Set(kinds.min().map { [$0] } ?? []) : kinds
        tappedSinceUncertainty = true
        guard inFlight == nil, let next = nextSet() else { return nil }
        return start(next)
    }

    /// A state the service reported outside this picker's requests (a feed page). Taken only
    /// while nothing is in flight; a request's own answer is fresher.
    public mutating func serverReported(_ state: Confirmed) {
        guard inFlight == nil else { return }
        confirmed = state
        wanted = state.mine
    }

    /// The outcome of request `id`. Returns the next request to send (at most one), and the event
    /// for the user, if any. Answers to anything but the request in flight are ignored.
    public mutating func receive(_ result: Result<Confirmed, CounterClientError>, for id: Int) -> (next: Request?, event: Event?) {
        guard let request = inFlight, request.id == id else { return (nil, nil) }
        inFlight = nil
        switch (result, request.kind) {
        case (.success(let state), .set):
            confirmed = state
            if let next = nextSet() { return (start(next), nil) }
            return (nil, .succeeded(state))
        case (.success(let state), .refresh):
            confirmed = state
            if !tappedSinceUncertainty { wanted = state.mine }
            guard let next = nextSet() else { return (nil, nil) }
            return (start(next), nil)
        case (.failure(let error), .set):
            wanted = confirmed.mine
            guard error.outcomeUnknown else { return (nil, .failed(error)) }
            // The change may have been applied: ask what the service holds now.
            tappedSinceUncertainty = false
            return (start(.refresh), .failed(error))
        case (.failure(let error), .refresh):
            let lostTap = wanted != confirmed.mine
            wanted = confirmed.mine
            return (nil, lostTap ? .failed(error) : nil)
        }
    }

    /// The one request that brings the service nearer to `wanted`: a kind wanted and not held
    /// first (with one kind per user, its `PUT` replaces the kind held), else a kind held and not
    /// wanted; `nil` when they agree.
    private func nextSet() -> Request.Kind? {
        if let added = wanted.subtracting(confirmed.mine).min() { return .set(kind: added, reacted: true) }
        if let removed = confirmed.mine.subtracting(wanted).min() { return .set(kind: removed, reacted: false) }
        return nil
    }

    private mutating func start(_ kind: Request.Kind) -> Request {
        let request = Request(id: nextID, kind: kind)
        nextID += 1
        inFlight = request
        return request
    }
}

extension ReactionStateMachine.Confirmed {
    /// What a reaction answer says.
    public init(_ status: ReactionStatus) {
        self.init(mine: Set(status.mine), counts: Dictionary(uniqueKeysWithValues: status.reactions.map { ($0.kind, $0.count) }))
    }
}
