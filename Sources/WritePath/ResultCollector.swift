import Synchronization

/// Gathers the results of several operations submitted one by one (a feed page's reads, say) and
/// hands them over, in order, once all are in — whichever thread answers last.
final class ResultCollector: Sendable {
    private struct State {
        var results: [Result<LikeState, Error>?]
        var remaining: Int
        var completion: (@Sendable ([Result<LikeState, Error>]) -> Void)?
    }

    private let state: Mutex<State>

    /// A collector of `count` results.
    init(count: Int) {
        state = Mutex(State(results: Array(repeating: nil, count: count), remaining: count, completion: nil))
    }

    /// Runs `completion` with every result once all are in (at once, if they are).
    func onComplete(_ completion: @escaping @Sendable ([Result<LikeState, Error>]) -> Void) {
        let done: [Result<LikeState, Error>]? = state.withLock { state in
            if state.remaining == 0 { return state.results.map { $0! } }
            state.completion = completion
            return nil
        }
        if let done { completion(done) }
    }

    /// Records the result at `index`; a second result for the same index is ignored.
    func set(_ index: Int, _ result: Result<LikeState, Error>) {
        let finished: ([Result<LikeState, Error>], (@Sendable ([Result<LikeState, Error>]) -> Void))? = state.withLock { state in
            guard state.results[index] == nil else { return nil }
            state.results[index] = result
            state.remaining -= 1
            guard state.remaining == 0, let completion = state.completion else { return nil }
            return (state.results.map { $0! }, completion)
        }
        if let (results, completion) = finished { completion(results) }
    }
}
