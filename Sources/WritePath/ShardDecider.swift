import CounterCore
import Persistence

/// The pure heart of a shard's group commit: given what Redis says now (each post's count and the
/// membership of the users in the batch), apply a batch of operations one after another, in
/// arrival order, and say what each caller gets and which changes must be written.
///
/// Deciding serially in memory is what makes answers consistent with one serial order while
/// thousands of callers share one Redis round trip.
struct ShardDecider {
    /// What is known of one post during a batch.
    struct PostView: Equatable {
        var likesCount: Int64
        /// Membership of the users this batch touches.
        var members: [Int64: Bool]
        /// With reactions: the count of every other kind the post holds (none at zero).
        var kindCounts: KindCounts = [:]
        /// With reactions: the other kinds each user of `members` holds, by name (a user who is
        /// absent holds none).
        var others: [Int64: [ReactionKind]] = [:]
    }

    /// One operation of the batch.
    struct Request: Hashable {
        let operation: LikeOperation
        let postID: Int64
        let userID: Int64
        /// The reaction's kind (`like` unless the deployment has others).
        var kind: ReactionKind = .like
        /// When the change was first acknowledged (Unix milliseconds), for one made earlier and
        /// written again (a dead letter replayed): its change keeps that time. `nil` for a new
        /// operation, whose change takes its log entry's time.
        var acknowledgedAt: Int64? = nil
    }

    /// The outcome of a batch.
    struct Decision: Equatable {
        /// One answer per request, in request order.
        var answers: [LikeState] = []
        /// For each request, the index of its change in `changes`, or `nil` if it changed nothing.
        var changeIndex: [Int?] = []
        /// The changes to write, in order.
        var changes: [LikeChange] = []
        /// Requests refused (by position), with why; their answer in `answers` means nothing.
        var refused: [Int: CounterError] = [:]
    }

    /// Applies `requests` in order to `views` (updated in place), per the deployment's reaction
    /// model (`model`).
    /// - Precondition: `views` holds every request's post, with the membership of every request's
    ///   user (except for `.count` requests, which need none).
    static func decide(_ requests: [Request], views: inout [Int64: PostView], model: ReactionModel = .likesOnly) -> Decision {
        guard model.isLikesOnly else { return decideReactions(requests, views: &views, model: model) }
        var decision = Decision()
        decision.answers.reserveCapacity(requests.count)
        for request in requests {
            if request.operation == .count {
                decision.changeIndex.append(nil)
                decision.answers.append(
                    LikeState(
                        postID: request.postID, userID: request.userID,
                        isLiked: false, likesCount: views[request.postID]!.likesCount))
                continue
            }
            let current = views[request.postID]!.members[request.userID]!
            let wanted = request.operation.wantedState(current: current)
            if wanted != current {
                // Changed in place: a copy of the view would copy its membership dictionary on
                // every change (quadratic in a hot post's batch).
                views[request.postID]!.members[request.userID] = wanted
                views[request.postID]!.likesCount += wanted ? 1 : -1
                decision.changeIndex.append(decision.changes.count)
                decision.changes.append(
                    LikeChange(
                        userID: request.userID, postID: request.postID, liked: wanted,
                        acknowledgedAt: request.acknowledgedAt))
            } else if request.operation.confirms(current: current) {
                // Logged again as it is: membership and count stay.
                decision.changeIndex.append(decision.changes.count)
                decision.changes.append(
                    LikeChange(
                        userID: request.userID, postID: request.postID, liked: current,
                        acknowledgedAt: request.acknowledgedAt))
            } else {
                decision.changeIndex.append(nil)
            }
            decision.answers.append(
                LikeState(
                    postID: request.postID, userID: request.userID,
                    isLiked: wanted, likesCount: views[request.postID]!.likesCount))
        }
        return decision
    }

    /// `decide` for a deployment with other kinds than `like`: each request names its kind; in
    /// the `one`-per-user model a user's new kind replaces the one held, in one decision (the
    /// old kind's end, then the new kind, one after the other in `changes`); in an open set a
    /// kind new to a post beyond `model.kindsPerPost` distinct kinds is refused. Every answer
    /// carries the post's summary after it.
    private static func decideReactions(_ requests: [Request], views: inout [Int64: PostView], model: ReactionModel) -> Decision {
        var decision = Decision()
        decision.answers.reserveCapacity(requests.count)
        decision.changeIndex.reserveCapacity(requests.count)
        let one = model.perUser == .one
        let capped: Bool
        if case .open = model.kinds { capped = true } else { capped = false }
        for (position, request) in requests.enumerated() {
            // One look-up of the post's view per request, changed in place.
            decideReaction(request, at: position, view: &views[request.postID]!, one: one, capped: capped, model: model, decision: &decision)
        }
        return decision
    }

    /// Decides `request` (the `position`th) on its post's `view`, appending its answer, its
    /// changes and any refusal to `decision`.
    private static func decideReaction(
        _ request: Request, at position: Int, view: inout PostView, one: Bool, capped: Bool, model: ReactionModel,
        decision: inout Decision
    ) {
        let post = request.postID
        if request.operation == .count {
            decision.changeIndex.append(nil)
            decision.answers.append(
                LikeState(
                    postID: post, userID: request.userID, isLiked: false, likesCount: view.likesCount,
                    reactions: ReactionSummary(likes: view.likesCount, others: view.kindCounts, liked: false, otherKinds: [])))
            return
        }
        let user = request.userID
        let kind = request.kind
        let liked = view.members[user]!
        let held = view.others[user] ?? []
        let current = kind.isLike ? liked : held.contains(kind)
        let wanted = request.operation.wantedState(current: current)
        var firstChange: Int?
        if wanted != current {
            if wanted, capped, let refusal = kindCapRefusal(adding: kind, to: view, post: post, by: user, one: one, cap: model.kindsPerPost) {
                decision.refused[position] = refusal
            } else {
                if wanted && one {
                    // The kind held goes first: a user holds one kind at most.
                    if liked, !kind.isLike {
                        firstChange = decision.changes.count
                        set(.like, false, user: user, post: post, view: &view, decision: &decision, at: request.acknowledgedAt)
                    }
                    for other in held where other != kind {
                        firstChange = firstChange ?? decision.changes.count
                        set(other, false, user: user, post: post, view: &view, decision: &decision, at: request.acknowledgedAt)
                    }
                }
                firstChange = firstChange ?? decision.changes.count
                set(kind, wanted, user: user, post: post, view: &view, decision: &decision, at: request.acknowledgedAt)
            }
        } else if request.operation.confirms(current: current) {
            firstChange = decision.changes.count
            decision.changes.append(LikeChange(userID: user, postID: post, kind: kind, liked: current, acknowledgedAt: request.acknowledgedAt))
        }
        decision.changeIndex.append(firstChange)
        let likedNow = view.members[user]!
        decision.answers.append(
            LikeState(
                postID: post, userID: user, isLiked: likedNow, likesCount: view.likesCount,
                reactions: ReactionSummary(likes: view.likesCount, others: view.kindCounts, liked: likedNow, otherKinds: view.others[user] ?? [])))
    }

    /// Makes `user` hold `kind` of `post` or not, in the view and as a change.
    private static func set(
        _ kind: ReactionKind, _ holds: Bool, user: Int64, post: Int64, view: inout PostView, decision: inout Decision,
        at acknowledgedAt: Int64?
    ) {
        if kind.isLike {
            view.members[user] = holds
            view.likesCount += holds ? 1 : -1
        } else {
            if holds {
                if var kinds = view.others.removeValue(forKey: user) {
                    // Taken out first, so that the array is changed in place, not copied.
                    kinds.append(kind)
                    kinds.sort()
                    view.others[user] = kinds
                } else {
                    view.others[user] = [kind]
                }
            } else if var kinds = view.others.removeValue(forKey: user) {
                kinds.removeAll { $0 == kind }
                if !kinds.isEmpty { view.others[user] = kinds }
            }
            let count = (view.kindCounts[kind] ?? 0) + (holds ? 1 : -1)
            view.kindCounts[kind] = count > 0 ? count : nil
        }
        decision.changes.append(LikeChange(userID: user, postID: post, kind: kind, liked: holds, acknowledgedAt: acknowledgedAt))
    }

    /// Why `user` may not add `kind` to `view`'s post in an open set: the post would hold more
    /// than `cap` distinct kinds (in the `one` model, after the user's own kind went). `nil`
    /// when it may.
    static func kindCapRefusal(
        adding kind: ReactionKind, to view: PostView, post: Int64, by user: Int64, one: Bool, cap: Int
    ) -> CounterError? {
        let present = kind.isLike ? view.likesCount > 0 : (view.kindCounts[kind] ?? 0) > 0
        if present { return nil }
        var distinct = view.kindCounts.count + (view.likesCount > 0 ? 1 : 0)
        if one {
            // The user's own kind, if the user was its only holder, goes with the switch.
            if view.members[user] == true && view.likesCount == 1 { distinct -= 1 }
            for other in view.others[user] ?? [] where view.kindCounts[other] == 1 { distinct -= 1 }
        }
        guard distinct >= cap else { return nil }
        return CounterError(
            code: .tooManyKinds,
            message:
                "post \(post) holds \(distinct) distinct reaction kinds, the most a post may hold (--reaction-kinds-per-post \(cap)); '\(kind)' is not one of them. Nothing was changed"
        )
    }
}
