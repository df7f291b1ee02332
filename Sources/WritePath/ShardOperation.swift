import ShardRouter

/// One caller's operation on a shard: what it asks, and how it is answered.
struct ShardOperation: Sendable {
    let request: ShardDecider.Request
    /// The slot of the operation's post (computed once: its hash is not free).
    let slot: UInt16
    /// Wait (up to `slotMoveWait`) even when the slot is not owned here: the caller has reason
    /// to think it is on its way (the map names this node its owner).
    let waitsForSlot: Bool
    /// Runs once, with the answer, on the shard's loop (or at once when the inbox refuses it).
    let completion: @Sendable (Result<LikeState, Error>) -> Void

    init(
        _ request: ShardDecider.Request, slot: UInt16? = nil, waitsForSlot: Bool = false,
        completion: @escaping @Sendable (Result<LikeState, Error>) -> Void
    ) {
        self.request = request
        self.slot = slot ?? request.slot
        self.waitsForSlot = waitsForSlot
        self.completion = completion
    }

    func answer(_ result: Result<LikeState, CounterError>) {
        completion(result.mapError { $0 })
    }
}

/// A caller waiting for a shard's answer to a request (a flush, a claim, statistics). The
/// machine keeps it and hands it back with the value (`ShardStateMachine.Action.reply`); it
/// never calls it.
struct ShardReply<Value: Sendable>: Sendable {
    private let deliver: @Sendable (Value) -> Void

    init(_ deliver: @escaping @Sendable (Value) -> Void) {
        self.deliver = deliver
    }

    /// The delivery of `value`, for the shell to run.
    func with(_ value: Value) -> ShardDelivery {
        let deliver = self.deliver
        return ShardDelivery { deliver(value) }
    }
}

/// A reply with its value, ready to be delivered by the shell.
struct ShardDelivery: Sendable {
    let run: @Sendable () -> Void
}

extension ShardDecider.Request {
    /// The hash slot of the request's post.
    var slot: UInt16 { HashSlot(post: postID).rawValue }
}
