/// What waits for the write-behind to have entries in PostgreSQL, and how it is told: a caller
/// of `flushAll`, operations answered with `--ack postgres`, a slot's drain or hand-off flush.
/// Pure: telling a waiter is actions (answers, replies) and the effects the router routes.
enum FlushWaiter {
    /// A caller of `flushAll`.
    case caller(ShardReply<Result<Void, Error>>)
    /// Nobody (`requestFlushAll`).
    case nobody
    /// Operations answered once their batch's entries are in PostgreSQL (`postgres` acks).
    case acknowledgements([(ShardOperation, LikeState)])
    /// A slot drained before it is served.
    case drain(slot: UInt16, epoch: Int64)
    /// A slot flushed before it is handed off.
    case handOffFlush(slot: UInt16, epoch: Int64)

    /// What it waited for is in PostgreSQL.
    func satisfied(into actions: inout [ShardStateMachine.Action]) -> [WriteBehind.Effect] {
        switch self {
        case .caller(let reply): actions.append(.reply(reply.with(.success(()))))
        case .nobody: break
        case .acknowledgements(let answers): actions.append(.answer(answers.map { ($0.0, .success($0.1)) }))
        case .drain(let slot, let epoch): return [.drained(slot: slot, epoch: epoch)]
        case .handOffFlush(let slot, let epoch): return [.handOffFlushed(slot: slot, epoch: epoch)]
        }
        return []
    }

    /// It will not be: its slot moved, its entries were lost, or the flusher stopped.
    func failed(with error: CounterError, into actions: inout [ShardStateMachine.Action]) -> [WriteBehind.Effect] {
        switch self {
        case .caller(let reply): actions.append(.reply(reply.with(.failure(error))))
        case .nobody: break
        case .acknowledgements(let answers): actions.append(.answer(answers.map { ($0.0, .failure(error)) }))
        case .drain(let slot, let epoch): return [.drainFailed(slot: slot, epoch: epoch, error: error)]
        case .handOffFlush(let slot, let epoch):
            // Its entries were lost with Redis: nothing of them is left to flush, so the hand-off
            // goes on. Otherwise the slot moved (its release fails through the slot's own move)
            // or the shard stopped (its release is told then).
            if error == ShardStateMachine.lostInFailover { return [.handOffFlushed(slot: slot, epoch: epoch)] }
        }
        return []
    }
}
