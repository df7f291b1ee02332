import Foundation
import Observation

/// The model behind one post's reaction picker: `ReactionStateMachine` plus the sending,
/// observable by SwiftUI (Observation works on Linux too), as `LikeButtonModel` is for a like
/// button. Main-actor isolated, as views are.
///
/// A tap shows at once: the user's kinds and every kind's count move together (with one kind per
/// user, a switch moves both counts in one step). At most one request is in flight; taps during
/// it are coalesced into at most one more, answers never undo a newer tap, a failure rolls back
/// to what the service last confirmed, and one whose outcome is unknown is followed by a read.
@MainActor @Observable
public final class ReactionPickerModel: Identifiable {
    public typealias Event = ReactionStateMachine.Event
    public typealias Mode = ReactionStateMachine.Mode
    /// Sends one request and reports the service's answer.
    public typealias Sender = @Sendable (ReactionStateMachine.Request.Kind) async -> Result<ReactionStateMachine.Confirmed, CounterClientError>

    public let postID: Int64
    /// The user the picker is for; `nil`: the signed-in user of the client's `userToken`.
    public let userID: Int64?
    /// How many kinds the user may hold: the deployment's `--reactions-per-user`.
    public let mode: Mode
    public nonisolated var id: Int64 { postID }

    /// What the picker shows: every kind with a count above zero, the largest count first (equal
    /// counts by name).
    public private(set) var counts: [ReactionStatus.KindCount]
    /// The shown total of every kind.
    public private(set) var total: Int64
    /// The user's kinds as shown (the latest wish), by name.
    public private(set) var mine: [String]
    /// Whether a request is in flight.
    public private(set) var isSending = false
    /// The latest success or failure, for views that react to it (a haptic, a toast).
    public private(set) var lastEvent: Event?
    /// Counts events, so a view notices two equal events in a row (`onChange(of: eventCount)`).
    public private(set) var eventCount = 0
    /// Called with every event as it happens.
    @ObservationIgnored public var onEvent: (@MainActor (Event) -> Void)?

    @ObservationIgnored private var machine: ReactionStateMachine
    @ObservationIgnored private let send: Sender
    @ObservationIgnored private var idleWaiters: [CheckedContinuation<Void, Never>] = []

    /// A picker that talks to the service through `client`: as the signed-in user of its
    /// `userToken` when `user` is `nil` (an app), else for `user` with the API token (a backend's
    /// tool, a test). Each wish of a kind is sent as `PUT`/`DELETE` (never a blind toggle); after
    /// a failure whose outcome is unknown, the post's reactions are read.
    public convenience init(
        post: Int64, user: Int64? = nil, mode: Mode, mine: Set<String>, counts: [String: Int64], client: CounterServiceClient
    ) {
        self.init(post: post, user: user, mode: mode, mine: mine, counts: counts) { request in
            do throws(CounterClientError) {
                let status: ReactionStatus
                switch (request, user) {
                case (.set(let kind, let reacted), let user?): status = try await client.setReacted(reacted, post: post, kind: kind, user: user)
                case (.set(let kind, let reacted), nil): status = try await client.setReacted(reacted, post: post, kind: kind)
                case (.refresh, let user?): status = try await client.reactions(post: post, user: user)
                case (.refresh, nil): status = try await client.myReactions(post: post)
                }
                return .success(ReactionStateMachine.Confirmed(status))
            } catch {
                return .failure(error)
            }
        }
    }

    /// A picker whose requests go through `send` (tests, previews, other transports).
    public init(post: Int64, user: Int64?, mode: Mode, mine: Set<String>, counts: [String: Int64], send: @escaping Sender) {
        postID = post
        userID = user
        self.mode = mode
        let machine = ReactionStateMachine(mode: mode, mine: mine, counts: counts)
        self.machine = machine
        self.counts = Self.shown(machine)
        total = machine.total
        self.mine = machine.mine
        self.send = send
    }

    /// The count shown for `kind` (`0` for a kind nobody holds).
    public func count(of kind: String) -> Int64 {
        machine.count(of: kind)
    }

    /// Whether the user's kinds, as shown, hold `kind`.
    public func isMine(_ kind: String) -> Bool {
        mine.contains(kind)
    }

    /// A tap on `kind`: with one kind per user it becomes the user's only kind (or none, when it
    /// was it); with many, it flips. Shown now; the request goes out in the background.
    public func tap(_ kind: String) {
        let request = machine.tap(kind)
        publish()
        if let request { dispatch(request) }
    }

    /// Asks for a set of kinds directly (with one kind per user, at most one is kept: the
    /// smallest name).
    public func want(_ kinds: Set<String>) {
        let request = machine.want(kinds)
        publish()
        if let request { dispatch(request) }
    }

    /// Takes a state the service reported elsewhere (a reaction route's answer, a read), unless a
    /// request is in flight.
    public func apply(_ status: ReactionStatus) {
        machine.serverReported(.init(status))
        publish()
    }

    /// Takes a feed page's entry (asked with `reactions`), unless a request is in flight. The
    /// entry holds the post's largest kinds only (`--reaction-summary-kinds`): a kind left out
    /// shows `0` until an answer about it. An entry without reactions changes nothing.
    public func apply(_ entry: FeedEntry) {
        guard let state = Self.confirmed(entry) else { return }
        machine.serverReported(state)
        publish()
    }

    /// Returns once no request is in flight (tests, previews, pull-to-refresh).
    public func settled() async {
        guard machine.isBusy else { return }
        await withCheckedContinuation { idleWaiters.append($0) }
    }

    /// What a feed page's entry says of the post's reactions; `nil` when it was not asked for.
    nonisolated static func confirmed(_ entry: FeedEntry) -> ReactionStateMachine.Confirmed? {
        guard let reactions = entry.reactions else { return nil }
        return .init(
            mine: Set(entry.mine ?? []),
            counts: Dictionary(reactions.map { ($0.kind, $0.count) }, uniquingKeysWith: { first, _ in first }))
    }

    private func dispatch(_ request: ReactionStateMachine.Request) {
        let send = self.send
        Task { [weak self] in
            let result = await send(request.kind)
            self?.receive(result, for: request.id)
        }
    }

    private func receive(_ result: Result<ReactionStateMachine.Confirmed, CounterClientError>, for id: Int) {
        let (next, event) = machine.receive(result, for: id)
        publish()
        if let event {
            lastEvent = event
            eventCount += 1
            onEvent?(event)
        }
        if let next { dispatch(next) }
        if !machine.isBusy {
            let waiters = idleWaiters
            idleWaiters = []
            for waiter in waiters { waiter.resume() }
        }
    }

    private func publish() {
        let shown = Self.shown(machine)
        if counts != shown { counts = shown }
        if total != machine.total { total = machine.total }
        if mine != machine.mine { mine = machine.mine }
        if isSending != machine.isBusy { isSending = machine.isBusy }
    }

    private static func shown(_ machine: ReactionStateMachine) -> [ReactionStatus.KindCount] {
        machine.counts.map { ReactionStatus.KindCount(kind: $0.kind, count: $0.count) }
    }
}

/// Reaction pickers for a feed: one `POST /v1/posts/query` (with `reactions`) seeds (or
/// refreshes) a model per post.
@MainActor @Observable
public final class ReactionFeedModel {
    /// The user whose kinds the pickers show; `nil`: the signed-in user of the client's `userToken`.
    public let userID: Int64?
    /// How many kinds a user may hold: the deployment's `--reactions-per-user`.
    public let mode: ReactionStateMachine.Mode
    /// The pickers, by post id.
    public private(set) var pickers: [Int64: ReactionPickerModel] = [:]
    @ObservationIgnored private let client: CounterServiceClient

    /// - Parameter user: `nil` (an app): the signed-in user of `client`'s `userToken`.
    public init(mode: ReactionStateMachine.Mode, user: Int64? = nil, client: CounterServiceClient) {
        self.mode = mode
        userID = user
        self.client = client
    }

    /// Loads a feed page's reactions and the user's kinds in one request; pickers that exist are
    /// updated (unless sending), new ones are made. Posts the service does not know get no picker.
    @discardableResult
    public func load(posts: [Int64]) async throws(CounterClientError) -> [ReactionPickerModel] {
        let entries =
            if let userID { try await client.feed(posts: posts, user: userID, reactions: true) } else {
                try await client.feed(posts: posts, reactions: true)
            }
        var result: [ReactionPickerModel] = []
        for entry in entries {
            if let existing = pickers[entry.postID] {
                existing.apply(entry)
                result.append(existing)
            } else {
                // A node that did not answer with reactions still gets a picker, empty until a tap.
                let state = ReactionPickerModel.confirmed(entry) ?? .init(mine: [], counts: [:])
                let picker = ReactionPickerModel(
                    post: entry.postID, user: userID, mode: mode, mine: state.mine, counts: state.counts, client: client)
                pickers[entry.postID] = picker
                result.append(picker)
            }
        }
        return result
    }
}
