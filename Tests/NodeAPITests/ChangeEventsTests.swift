import CounterWire
import Foundation
import NodeTestSupport
import Persistence
import Synchronization
import TestSupport
import Testing

@testable import NodeAPI

/// `GET /v1/events` over a node whose flushes write events, each test on a database of its own:
/// the outbox is one per database, and these tests read all of it.
@Suite("Change events over HTTP: pages, long polls, bad input, pruning, a consumer across a PostgreSQL restart")
struct ChangeEventsTests {
    static func page(_ http: HTTPHarness, _ query: String, token: String = HTTPHarness.adminToken) async throws -> EventsPage {
        let response = try await http.send("GET", "/v1/events" + query, token: token)
        #expect(response.status == 200, "\(query): \(response.text)")
        return try JSONDecoder().decode(EventsPage.self, from: Data(response.text.utf8))
    }

    static func withEventsNode<T>(posts: Int = 3, flushOnlyWhenAsked: Bool = true, _ body: (HTTPHarness) async throws -> T) async throws -> T {
        try await TestEnvironment.withScratchDatabase { _, url in
            let http = try await HTTPHarness.start(
                posts: posts, postgresURL: url,
                writePath: {
                    $0.events = true
                    if flushOnlyWhenAsked { $0.flushOnlyWhenAsked() }
                })
            do {
                let value = try await body(http)
                await http.stop()
                return value
            } catch {
                await http.stop()
                throw error
            }
        }
    }

    @Test("likes and unlikes become events once flushed, oldest first, paged by after and limit; a toggle pair undone before the flush makes none")
    func eventsArePagedInOrder() async throws {
        try await Self.withEventsNode { http in
            let (a, b) = (http.posts[0], http.posts[1])
            #expect(try await Self.page(http, "") == EventsPage(events: [], nextAfter: 0, newestID: 0))
            _ = try await http.send("PUT", "/v1/posts/\(a)/likes/1")
            _ = try await http.send("PUT", "/v1/posts/\(b)/likes/2")
            // Liked and unliked before any flush: nothing reaches PostgreSQL, no event.
            _ = try await http.send("PUT", "/v1/posts/\(a)/likes/3")
            _ = try await http.send("DELETE", "/v1/posts/\(a)/likes/3")
            #expect(try await Self.page(http, "?after=0").events.isEmpty, "nothing is an event before its flush commits")
            _ = try await http.send("POST", "/admin/flush?wait=true", token: HTTPHarness.adminToken)
            _ = try await http.send("DELETE", "/v1/posts/\(a)/likes/1")
            _ = try await http.send("POST", "/admin/flush?wait=true", token: HTTPHarness.adminToken)

            let first = try await Self.page(http, "?after=0&limit=2")
            #expect(first.events.map(\.id) == [1, 2] && first.nextAfter == 2 && first.newestID == 3)
            #expect(Set(first.events.map { "\($0.postID)/\($0.userID)/\($0.liked)" }) == ["\(a)/1/true", "\(b)/2/true"])
            let second = try await Self.page(http, "?after=\(first.nextAfter)&limit=2")
            #expect(second.events.map(\.id) == [3] && second.nextAfter == 3)
            let unlike = try #require(second.events.first)
            #expect(unlike.postID == a && unlike.userID == 1 && !unlike.liked)
            #expect(LikeTime.milliseconds(unlike.likedAt) != nil && LikeTime.milliseconds(unlike.committedAt) != nil)
            #expect(try #require(LikeTime.milliseconds(unlike.likedAt)) <= (LikeTime.milliseconds(unlike.committedAt) ?? 0))
            #expect(try await Self.page(http, "?after=3") == EventsPage(events: [], nextAfter: 3, newestID: 3))
        }
    }

    @Test("a long poll answers as soon as the next flush commits, and after its wait when nothing comes")
    func longPollWakesOnCommit() async throws {
        try await Self.withEventsNode(flushOnlyWhenAsked: false) { http in
            let post = http.posts[0]
            let started = ContinuousClock.now
            let quiet = try await Self.page(http, "?after=0&wait=1")
            #expect(quiet.events.isEmpty && ContinuousClock.now - started >= .milliseconds(950))

            let waiting = Task { () -> (EventsPage, ContinuousClock.Instant) in
                // Read with a timeout beyond the wait (the harness's own is 10 s).
                let request = RawHTTPClient.request("GET", "/v1/events?after=0&wait=60", token: HTTPHarness.adminToken)
                let response = try #require(
                    try await RawHTTPClient.exchange(port: http.port, chunks: [request], responses: 1, timeout: .seconds(90)).first)
                #expect(response.status == 200, "\(response.text)")
                return (try JSONDecoder().decode(EventsPage.self, from: Data(response.text.utf8)), ContinuousClock.now)
            }
            // The long poll waits: the watch has read the outbox's clock and sleeps until its next read.
            try await Self.waitUntilWatching(http)
            let liked = ContinuousClock.now
            _ = try await http.send("PUT", "/v1/posts/\(post)/likes/9")
            let (page, answered) = try await waiting.value
            #expect(page.events.map(\.userID) == [9] && page.nextAfter == 1)
            // Flushed within its interval and seen at the next poll of the clock: here well under
            // a second, and even on a machine busy with other tests far from the 60 s wait.
            #expect(answered - liked < .seconds(30), "answered \(answered - liked) after the like")
        }
    }

    @Test(
        "a long poll is woken by this node's flush commit itself: with the outbox's clock read only once an hour, it is answered once the flush commits"
    )
    func flushCommitWakesLongPoll() async throws {
        try await Self.withEventsNode { http in
            let post = http.posts[0]
            // Only a ring of the flush commits' alarm can answer the long poll before the hour.
            await http.api.events.watch.setInterval(.seconds(3_600))
            let gaveUp = Gate()
            let waiting = Task { () -> (page: EventsPage, afterGivingUp: Bool) in
                let request = RawHTTPClient.request("GET", "/v1/events?after=0&wait=60", token: HTTPHarness.adminToken)
                let response = try #require(
                    try await RawHTTPClient.exchange(port: http.port, chunks: [request], responses: 1, timeout: .seconds(90)).first)
                let afterGivingUp = gaveUp.isOpen
                #expect(response.status == 200, "\(response.text)")
                return (try JSONDecoder().decode(EventsPage.self, from: Data(response.text.utf8)), afterGivingUp)
            }
            // The long poll waits: the watch read the clock (no event yet) and sleeps on the alarm.
            try await Self.waitUntilWatching(http)
            // Acknowledged, not flushed (flushes only when asked): the like alone wakes nobody.
            _ = try await http.send("PUT", "/v1/posts/\(post)/likes/9")
            #expect(http.writePath.service.flushCommits.hasSleeper)
            try await http.writePath.service.flush()
            // The test gives up after 30 s and rings the alarm itself (so the node can stop): an
            // answer that comes only then was not woken by the commit.
            let givingUp = Task {
                try await Task.sleep(for: .seconds(30))
                gaveUp.open()
                http.writePath.service.flushCommits.ring()
            }
            let (page, afterGivingUp) = try await waiting.value
            givingUp.cancel()
            #expect(!afterGivingUp, "the flush commit did not wake the long poll")
            #expect(page.events.map(\.userID) == [9] && page.nextAfter == 1)
        }
    }

    /// Waits (up to 30 s) until a long poll's watch has read the outbox's clock and sleeps until
    /// its next read or a flush commit: a commit from now on is one the poll must be woken for.
    static func waitUntilWatching(_ http: HTTPHarness) async throws {
        let alarm = http.writePath.service.flushCommits
        let deadline = ContinuousClock.now + .seconds(30)
        while !alarm.hasSleeper && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(1)) }
        try #require(alarm.hasSleeper, "no long poll waits")
    }

    @Test("bad after, limit and wait, and unknown arguments, are 400 with a code; the events token or the admin token reads, others are 401")
    func badInputIsRefused() async throws {
        try await Self.withEventsNode { http in
            for query in [
                "?after=-1", "?after=abc", "?after=1.5", "?after=", "?after=99999999999999999999", "?limit=0", "?limit=1001", "?limit=x",
                "?wait=61", "?wait=-1", "?wait=1s", "?cursor=1", "?after=5",
            ] {
                let response = try await http.send("GET", "/v1/events" + query, token: HTTPHarness.adminToken)
                #expect(
                    response.status == 400 && response.text.contains(#""code":"invalid_argument""#), "\(query): \(response.status) \(response.text)")
            }
            let api = try await http.send("GET", "/v1/events", token: HTTPHarness.apiToken)
            #expect(api.status == 401, "the API token does not read events: \(api.text)")
            let none = try await http.send("GET", "/v1/events", token: nil)
            #expect(none.status == 401)
            let post = try await http.send("POST", "/v1/events", token: HTTPHarness.adminToken)
            #expect(post.status == 405)
        }
        // A node with events off says so instead of answering empty pages forever.
        let off = try await HTTPHarness.start(posts: 1)
        let refused = try await off.send("GET", "/v1/events", token: HTTPHarness.adminToken)
        #expect(refused.status == 409 && refused.text.contains(#""code":"events_off""#), "\(refused.text)")
        await off.stop()
        let tokens = AccessTokens(api: HTTPHarness.apiToken, admin: HTTPHarness.adminToken, events: "events-token-0123456789")
        #expect(tokens.refusal("Bearer events-token-0123456789", for: APIRoutes.table.route("/v1/events")!.access) == nil)
        #expect(tokens.refusal("Bearer \(HTTPHarness.adminToken)", for: APIRoutes.table.route("/v1/events")!.access) == nil)
        #expect(tokens.refusal("Bearer \(HTTPHarness.apiToken)", for: APIRoutes.table.route("/v1/events")!.access) != nil)
        #expect(
            tokens.refusal("Bearer events-token-0123456789", for: APIRoutes.table.route("/admin/stats")!.access) != nil,
            "the events token opens nothing else")
        #expect(tokens.refusal("Bearer events-token-0123456789", for: APIRoutes.table.route("/v1/posts/{post}")!.access) != nil)
    }

    @Test("a consumer behind retention gets 410 events_pruned, not a silent gap; from the oldest kept it reads on")
    func prunedEventsAreSaid() async throws {
        try await Self.withEventsNode { http in
            let post = http.posts[0]
            for user in 1...6 { _ = try await http.send("PUT", "/v1/posts/\(post)/likes/\(user)") }
            _ = try await http.send("POST", "/admin/flush?wait=true", token: HTTPHarness.adminToken)
            let pool = http.writePath.pool
            try await pool.query("UPDATE counter_like_events SET committed_at = committed_at - interval '2 days' WHERE id <= 4")
            #expect(try await LikeEvents(pool: pool).prune(olderThan: .seconds(86_400), batch: 100) == 4)
            for after in [1, 2, 3] {
                let gone = try await http.send("GET", "/v1/events?after=\(after)", token: HTTPHarness.adminToken)
                #expect(
                    gone.status == 410 && gone.text.contains(#""code":"events_pruned""#) && gone.text.contains("after=4"), "\(after): \(gone.text)")
            }
            #expect(try await Self.page(http, "?after=4").events.map(\.id) == [5, 6])
            #expect(try await Self.page(http, "?after=0").events.map(\.id) == [5, 6], "0 starts at the oldest kept")
            #expect(try await Self.page(http, "").events.map(\.id) == [5, 6])
        }
    }

    @Test("the consumer example prints a notification per event and keeps its cursor in a file: run again, it goes on where it stopped")
    func consumerExampleKeepsItsCursor() async throws {
        try await Self.withEventsNode { http in
            let post = http.posts[0]
            let cursor = FileManager.default.temporaryDirectory.appendingPathComponent("events-cursor-\(UInt32.random(in: 0...UInt32.max))").path
            defer { try? FileManager.default.removeItem(atPath: cursor) }
            func consume() async throws -> [String] {
                let example = try ChildProcess([
                    ChildProcess.builtProduct("counter-events-example"), "--node", "http://127.0.0.1:\(http.port)",
                    "--token", HTTPHarness.adminToken, "--cursor-file", cursor, "--until-caught-up",
                ])
                #expect(try await example.waitForExit() == 0)
                return example.output
            }
            for user in 1...3 { _ = try await http.send("PUT", "/v1/posts/\(post)/likes/\(user)") }
            _ = try await http.send("POST", "/admin/flush?wait=true", token: HTTPHarness.adminToken)
            let first = try await consume()
            #expect(first.count == 3 && first.allSatisfy { $0.contains("liked post \(post)") }, "\(first)")
            #expect(try String(contentsOfFile: cursor, encoding: .utf8) == "3\n")

            _ = try await http.send("DELETE", "/v1/posts/\(post)/likes/2")
            _ = try await http.send("POST", "/admin/flush?wait=true", token: HTTPHarness.adminToken)
            let second = try await consume()
            #expect(
                second == [
                    "event 4: user 2 took back their like of post \(post) at \(second.first.flatMap { $0.split(separator: " ").last.map(String.init) } ?? "?")"
                ])
            #expect(try String(contentsOfFile: cursor, encoding: .utf8) == "4\n")
            #expect(try await consume().isEmpty, "nothing new: nothing printed")
        }
    }

    @Test("a consumer that keeps its cursor misses nothing while PostgreSQL and Redis restart under writes", .timeLimit(.minutes(3)))
    func consumerAcrossRestart() async throws {
        try await PrivateServers.with { servers in
            let http = try await HTTPHarness.start(
                posts: 4, postgresURL: servers.postgresURL, redisURL: servers.redisURL,
                writePath: {
                    $0.events = true
                })
            let posts = http.posts
            let writersDone = Mutex(false)
            let consuming = Task { () -> ([ChangeEvent], Int64) in
                var seen: [ChangeEvent] = []
                var after: Int64 = 0
                var quietPolls = 0
                // Reads until the writers are done and three long polls in a row found nothing.
                while quietPolls < 3 {
                    guard let response = try? await http.send("GET", "/v1/events?after=\(after)&limit=50&wait=1", token: HTTPHarness.adminToken),
                        response.status == 200,
                        let page = try? JSONDecoder().decode(EventsPage.self, from: Data(response.text.utf8))
                    else {
                        try await Task.sleep(for: .milliseconds(100)) // PostgreSQL is down: try again
                        continue
                    }
                    seen += page.events
                    after = page.nextAfter
                    quietPolls = page.events.isEmpty && writersDone.withLock({ $0 }) ? quietPolls + 1 : 0
                }
                return (seen, after)
            }
            // Toggles by 20 users over the posts, with a restart of both servers in the middle.
            for round in 0..<3 {
                for user in Int64(1)...20 {
                    _ = try? await http.send("POST", "/v1/posts/\(posts[Int(user) % posts.count])/likes/\(user)/toggle")
                }
                if round == 1 { try await servers.run("restart") }
                try await Task.sleep(for: .milliseconds(200))
            }
            var flushed = false
            for _ in 0..<50 where !flushed {
                flushed = (try? await http.send("POST", "/admin/flush?wait=true", token: HTTPHarness.adminToken))?.status == 200
                if !flushed { try await Task.sleep(for: .milliseconds(200)) }
            }
            #expect(flushed)
            writersDone.withLock { $0 = true }
            var (seen, cursor) = try await consuming.value
            let pool = http.writePath.pool
            // As a consumer goes on: what a late retry committed after its quiet polls follows its cursor.
            seen += try await LikeEvents(pool: pool).read(after: cursor, limit: 100_000).map { EventFeedAnswers.body($0) }
            let all = try await LikeEvents(pool: pool).read(after: 0, limit: 100_000)
            #expect(!all.isEmpty)
            #expect(seen.map(\.id) == all.map(\.id), "the consumer saw \(seen.count) of \(all.count) events")
            #expect(all.map(\.id) == Array(1...Int64(all.count)))
            let rows = try await pool.query("SELECT user_id, post_id FROM likes WHERE post_id = ANY($1::bigint[])", [.int64Array(posts)])
            var told: [String: Bool] = [:]
            for event in all { told["\(event.userID)/\(event.postID)"] = event.liked }
            #expect(Set(told.filter(\.value).keys) == Set(try rows.map { "\(try $0.int64(0))/\(try $0.int64(1))" }))
            await http.stop()
        }
    }
}
