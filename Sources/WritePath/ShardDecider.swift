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
    }

    /// One operation of the batch.
    struct Request: Hashable {
        let operation: LikeOperation
        let postID: Int64
        let userID: Int64
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
    }

    /// Applies `requests` in order to `views` (updated in place).
    /// - Precondition: `views` holds every request's post, with the membership of every request's
    ///   user (except for `.count` requests, which need none).
    static func decide(_ requests: [Request], views: inout [Int64: PostView]) -> Decision {
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
}
