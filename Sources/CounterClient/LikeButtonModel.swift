import Foundation
import Observation

/// The model behind one like button: `LikeStateMachine` plus the sending, observable by SwiftUI
/// (Observation works on Linux too). Main-actor isolated, as views are.
@MainActor @Observable
public final class LikeButtonModel: Identifiable {
    public typealias Event = LikeStateMachine.Event
    /// Sends one request and reports the service's answer.
    public typealias Sender = @Sendable (LikeStateMachine.Request.Kind) async -> Result<LikeStateMachine.Confirmed, CounterClientError>

    public let postID: Int64
    /// The user the button is for; `nil`: the signed-in user of the client's `userToken`.
    public let userID: Int64?
    public nonisolated var id: Int64 { postID }

    /// What the button shows.
    public private(set) var isLiked: Bool
    public private(set) var likesCount: Int64
    /// Whether a request is in flight.
    public private(set) var isSending = false
    /// The latest success or failure, for views that react to it (a haptic, a toast).
    public private(set) var lastEvent: Event?
    /// Counts events, so a view notices two equal events in a row (`onChange(of: eventCount)`).
    public private(set) var eventCount = 0
    /// Called with every event as it happens.
    @ObservationIgnored public var onEvent: (@MainActor (Event) -> Void)?

    @ObservationIgnored private var machine: LikeStateMachine
    @ObservationIgnored private let send: Sender
    @ObservationIgnored private var idleWaiters: [CheckedContinuation<Void, Never>] = []

    /// A button that talks to the service through `client`: as the signed-in user of its
    /// `userToken` when `user` is `nil` (an app), else for `user` with the API token (a backend's
    /// tool, a test).
    public convenience init(post: Int64, user: Int64? = nil, isLiked: Bool, likesCount: Int64, client: CounterServiceClient) {
        self.init(post: post, user: user, isLiked: isLiked, likesCount: likesCount) { kind in
            do throws(CounterClientError) {
                let status: LikeStatus
                switch (kind, user) {
                case (.setLiked(let liked), let user?): status = try await client.setLiked(liked, post: post, user: user)
                case (.setLiked(let liked), nil): status = try await client.setLiked(liked, post: post)
                case (.refresh, let user?): status = try await client.status(post: post, user: user)
                case (.refresh, nil): status = try await client.status(post: post)
                }
                return .success(LikeStateMachine.Confirmed(isLiked: status.isLiked, likesCount: status.likesCount))
            } catch {
                return .failure(error)
            }
        }
    }

    /// A button whose requests go through `send` (tests, previews, other transports).
    public init(post: Int64, user: Int64?, isLiked: Bool, likesCount: Int64, send: @escaping Sender) {
        postID = post
        userID = user
        machine = LikeStateMachine(isLiked: isLiked, likesCount: likesCount)
        self.isLiked = isLiked
        self.likesCount = likesCount
        self.send = send
    }

    /// A tap: the shown state changes now; the request goes out in the background.
    public func tap() {
        let request = machine.tap()
        publish()
        if let request { dispatch(request) }
    }

    /// Asks for a state directly (e.g. a double-tap on a photo that only likes).
    public func setLiked(_ liked: Bool) {
        let request = machine.want(liked)
        publish()
        if let request { dispatch(request) }
    }

    /// Takes a state the service reported elsewhere (a feed page), unless a request is in flight.
    public func apply(_ entry: FeedEntry) {
        machine.serverReported(.init(isLiked: entry.isLiked, likesCount: entry.likesCount))
        publish()
    }

    /// Returns once no request is in flight (tests, previews, pull-to-refresh).
    public func settled() async {
        guard machine.isBusy else { return }
        await withCheckedContinuation { idleWaiters.append($0) }
    }

    private func dispatch(_ request: LikeStateMachine.Request) {
        let send = self.send
        Task { [weak self] in
            let result = await send(request.kind)
            self?.receive(result, for: request.id)
        }
    }

    private func receive(_ result: Result<LikeStateMachine.Confirmed, CounterClientError>, for id: Int) {
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
        if isLiked != machine.isLiked { isLiked = machine.isLiked }
        if likesCount != machine.likesCount { likesCount = machine.likesCount }
        if isSending != machine.isBusy { isSending = machine.isBusy }
    }
}

/// Like buttons for a feed: one `POST /v1/posts/query` seeds (or refreshes) a model per post.
@MainActor @Observable
public final class LikeFeedModel {
    /// The user whose likes the buttons show; `nil`: the signed-in user of the client's `userToken`.
    public let userID: Int64?
    /// The buttons, by post id.
    public private(set) var buttons: [Int64: LikeButtonModel] = [:]
    @ObservationIgnored private let client: CounterServiceClient

    /// - Parameter user: `nil` (an app): the signed-in user of `client`'s `userToken`.
    public init(user: Int64? = nil, client: CounterServiceClient) {
        userID = user
        self.client = client
    }

    /// Loads a feed page's counts and likes in one request; buttons that exist are updated
    /// (unless sending), new ones are made. Posts the service does not know get no button.
    @discardableResult
    public func load(posts: [Int64]) async throws(CounterClientError) -> [LikeButtonModel] {
        let entries = if let userID { try await client.feed(posts: posts, user: userID) } else { try await client.feed(posts: posts) }
        var result: [LikeButtonModel] = []
        for entry in entries {
            if let existing = buttons[entry.postID] {
                existing.apply(entry)
                result.append(existing)
            } else {
                let button = LikeButtonModel(
                    post: entry.postID, user: userID, isLiked: entry.isLiked,
                    likesCount: entry.likesCount, client: client)
                buttons[entry.postID] = button
                result.append(button)
            }
        }
        return result
    }
}
