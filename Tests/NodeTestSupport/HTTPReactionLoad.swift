import CounterWire
import Foundation
import PostgresDriver
import Synchronization
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Reactions of random kinds — `PUT`, `DELETE` and toggles — over HTTP from concurrent workers to
/// random nodes of a cluster, each worker owning its users so a pair never has two operations in
/// flight; remembers each pair's kinds as the last answer gave them (`mine`), and which pairs a
/// failure or a missing answer left unknown. `settle` reads those once no node can still act on
/// their requests; `verify` holds PostgreSQL to the answers.
package final class HTTPReactionLoad: Sendable {
    package let posts: [Int64]
    package let kinds: [String]
    /// Whether a user holds one kind of a post at most: then no answer may show two.
    package let onePerUser: Bool
    private let state = Mutex<
        (
            expected: [Pair: Set<String>?], stop: Bool, acknowledged: Int, failed: Int, twoKinds: [String],
            unanswered: [Pair: ContinuousClock.Instant]
        )
    >(([:], false, 0, 0, [], [:]))
    private let nodes = Mutex<[String]>([])

    package init(posts: [Int64], kinds: [String], onePerUser: Bool) {
        self.posts = posts
        self.kinds = kinds
        self.onePerUser = onePerUser
    }

    /// The node URLs requests go to (changed as nodes come and go).
    package func setNodes(_ urls: [String]) { nodes.withLock { $0 = urls } }

    package var acknowledged: Int { state.withLock { $0.acknowledged } }
    package var failed: Int { state.withLock { $0.failed } }
    /// Answers that showed a user with two kinds while one per user holds: each one a bug.
    package var twoKinds: [String] { state.withLock { $0.twoKinds } }

    package func run(workers: Int, usersPerWorker: Int = 10) async {
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<workers {
                group.addTask {
                    while !self.state.withLock({ $0.stop }) {
                        let pair = Pair(user: Int64(worker * usersPerWorker + Int.random(in: 1...usersPerWorker)), post: self.posts.randomElement()!)
                        if !self.state.withLock({ $0.unanswered[pair] != nil }) {
                            await self.send(["toggle", "PUT", "DELETE", "toggle"].randomElement()!, self.kinds.randomElement()!, pair)
                        }
                        try? await Task.sleep(for: .milliseconds(20))
                    }
                }
            }
        }
    }

    package func stop() { state.withLock { $0.stop = true } }

    /// Waits until `count` more operations than `since` were acknowledged, or throws after `timeout`.
    package func waitForAcknowledged(_ count: Int, since: Int = 0, timeout: Duration = .seconds(60)) async throws {
        let deadline = ContinuousClock.now + timeout
        while acknowledged < since + count {
            guard ContinuousClock.now < deadline else {
                throw HarnessError("the load acknowledged \(acknowledged - since) reactions of \(count) within \(timeout)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Sends `method` of `kind` for `pair` to a random node and records the answer.
    private func send(_ method: String, _ kind: String, _ pair: Pair) async {
        guard let base = nodes.withLock({ $0.randomElement() }) else { return }
        let path = "/v1/posts/\(pair.post)/reactions/\(kind)/users/\(pair.user)" + (method == "toggle" ? "/toggle" : "")
        var request = URLRequest(url: URL(string: base + path)!)
        request.httpMethod = method == "toggle" ? "POST" : method
        do {
            let (data, response) = try await ClusterHTTP.session.data(for: request)
            if (response as? HTTPURLResponse)?.statusCode == 200, let answer = try? WireDecoder.decode(ReactionStatus.self, from: Array(data)) {
                record(pair, answer)
            } else {
                state.withLock {
                    $0.expected[pair] = .some(nil)
                    $0.failed += 1
                }
            }
        } catch {
            state.withLock {
                $0.expected[pair] = .some(nil)
                $0.unanswered[pair] = .now
                $0.failed += 1
            }
        }
    }

    private func record(_ pair: Pair, _ answer: ReactionStatus) {
        state.withLock { state in
            state.expected[pair] = .some(Set(answer.mine))
            state.acknowledged += 1
            if onePerUser && answer.mine.count > 1 { state.twoKinds.append("\(pair): \(answer)") }
        }
    }

    /// Reads the kinds of every pair whose outcome is unknown, through `node` — a pair whose
    /// request went unanswered only once `HTTPPairLoad.requestHoldLimit` has passed since (a node
    /// may still act on it until then).
    package func settle(via node: String, timeout: Duration = .seconds(40)) async throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            let open = state.withLock { state in
                state.expected.filter { entry in
                    entry.value == nil && (state.unanswered[entry.key].map { .now - $0 >= HTTPPairLoad.requestHoldLimit } ?? true)
                }.map(\.key)
            }
            let held = state.withLock { $0.expected.values.filter { $0 == nil }.count } - open.count
            if open.isEmpty && held == 0 { return }
            guard ContinuousClock.now < deadline else { throw HarnessError("\(open.count + held) pairs still unsettled") }
            for pair in open {
                let url = URL(string: "\(node)/v1/posts/\(pair.post)/reactions?user=\(pair.user)")!
                if let (data, response) = try? await ClusterHTTP.control.data(from: url), (response as? HTTPURLResponse)?.statusCode == 200,
                    let answer = try? WireDecoder.decode(ReactionStatus.self, from: Array(data))
                {
                    state.withLock { $0.expected[pair] = .some(Set(answer.mine)) }
                }
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// PostgreSQL after the flush against the answers: each pair's rows (its likes as `like`) are
    /// its last answer's kinds, no rows nobody asked for, each kind's count equal to its rows, and
    /// with one per user nobody with two kinds.
    package func verify(pool: PostgresPool) async throws {
        let rows = try await pool.query(
            """
            SELECT user_id, post_id, 'like' FROM likes WHERE post_id = ANY($1::bigint[])
            UNION ALL SELECT user_id, post_id, kind FROM reactions WHERE post_id = ANY($1::bigint[])
            """, [.int64Array(posts)])
        var held: [Pair: Set<String>] = [:]
        for row in rows { held[Pair(user: try row.int64(0), post: try row.int64(1)), default: []].insert(row.string(2) ?? "") }
        let expected = state.withLock { $0.expected }
        let wrong = expected.filter { $0.value != .some(held[$0.key] ?? []) }
        #expect(
            wrong.isEmpty,
            "pairs whose rows are not their last answer: \(wrong.prefix(5).map { "\($0.key): \(String(describing: $0.value)), rows \(held[$0.key] ?? [])" })"
        )
        let unasked = held.keys.filter { expected[$0] == nil }
        #expect(unasked.isEmpty, "rows nobody asked for: \(unasked.prefix(5))")
        if onePerUser { #expect(held.values.allSatisfy { $0.count <= 1 }, "a user with two kinds in the rows") }
        #expect(twoKinds.isEmpty, "answers with two kinds: \(twoKinds.prefix(3))")
        for (key, tally) in try await ReactionTallies.of(posts, in: pool) {
            #expect(tally.rows == tally.count, "post \(key.postID), \(key.kind): count \(tally.count), rows \(tally.rows)")
        }
    }
}
