import CounterClient
import Foundation
import NodeTestSupport
import Testing

/// The client library against a running node on the real test servers.
@Suite("Client library against a node")
@MainActor
struct ClientIntegrationTests {
    static func client(_ http: HTTPHarness) -> CounterServiceClient {
        CounterServiceClient(
            configuration: .init(
                baseURL: URL(string: "http://127.0.0.1:\(http.port)")!,
                apiToken: HTTPHarness.apiToken, adminToken: HTTPHarness.adminToken))
    }

    @Test("many buttons on one post tapping at once end agreeing with the service; PostgreSQL's count equals its rows")
    func concurrentButtons() async throws {
        let http = try await HTTPHarness.start(posts: 1)
        let post = http.posts[0]
        let client = Self.client(http)
        // Forty users, each with the post's button seeded from a feed query.
        var buttons: [LikeButtonModel] = []
        for user in Int64(1)...40 {
            let feed = LikeFeedModel(user: user, client: client)
            buttons += try await feed.load(posts: [post])
        }
        #expect(buttons.count == 40)
        var failures = 0
        for button in buttons { button.onEvent = { if case .failed = $0 { failures += 1 } } }

        // Rounds of random taps (0-3 per button per round) while earlier requests are in flight.
        var generator = SystemRandomNumberGenerator()
        var taps = 0
        for _ in 1...8 {
            for button in buttons {
                for _ in 0..<Int.random(in: 0...3, using: &generator) {
                    button.tap()
                    taps += 1
                }
            }
            try await Task.sleep(for: .milliseconds(Int.random(in: 0...5, using: &generator)))
        }
        let shown = buttons.map(\.isLiked)
        for button in buttons { await button.settled() }
        #expect(failures == 0)
        #expect(buttons.map(\.isLiked) == shown) // every final tap stuck

        // Every button agrees with the service about its user's like; after one feed refresh,
        // about the count too.
        for button in buttons {
            let status = try await client.status(post: post, user: button.userID!)
            #expect(status.isLiked == button.isLiked, "user \(button.userID!)")
        }
        let liked = Int64(buttons.filter(\.isLiked).count)
        for button in buttons {
            let entries = try await client.feed(posts: [post], user: button.userID!)
            let entry = try #require(entries.first)
            #expect(entry.isLiked == button.isLiked && entry.likesCount == liked) // the service's view
            button.apply(entry)
            #expect(button.likesCount == liked)
        }

        let flushed = try await client.flush()
        #expect(flushed.flushed)
        let counts = try await http.writePath.postgresCounts()
        #expect(counts[post]?.count == liked && counts[post]?.rows == liked, "\(taps) taps")
        let inspection = try await client.inspect(post: post)
        #expect(inspection.verdict == "agree")
        await http.stop()
    }

    @Test("one feed query seeds a button per post; unknown posts get none; a refused tap rolls back")
    func feedSeeding() async throws {
        let http = try await HTTPHarness.start(posts: 3)
        let client = Self.client(http)
        _ = try await client.like(post: http.posts[1], user: 9)
        let feed = LikeFeedModel(user: 9, client: client)
        let buttons = try await feed.load(posts: http.posts + [http.posts[2] + 1_000_000])
        #expect(buttons.map(\.postID) == http.posts)
        #expect(buttons.map(\.isLiked) == [false, true, false])
        #expect(buttons.map(\.likesCount) == [0, 1, 0])
        #expect(feed.buttons.count == 3)

        // A button for a post the service does not know: the tap is refused (404) and rolled back.
        let stale = LikeButtonModel(post: http.posts[2] + 2_000_000, user: 9, isLiked: false, likesCount: 0, client: client)
        stale.tap()
        #expect(stale.isLiked)
        await stale.settled()
        #expect(!stale.isLiked && stale.likesCount == 0)
        guard case .failed(let error)? = stale.lastEvent else {
            Issue.record("no failure event")
            return
        }
        #expect(error.serverCode == "post_not_found")
        await http.stop()
    }
}
