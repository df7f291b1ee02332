import CounterClient
import Foundation
import NodeTestSupport
import Synchronization
import Testing
import UserTokens

@testable import NodeAPI

/// The client library calling as a signed-in user, with a token provider.
@Suite("Client library with end users' tokens")
@MainActor
struct ClientUserTokenTests {
    nonisolated static let signer = TokenSigner(secret: UserRoutesTests.secret)

    /// Records how it was asked; gives an expired token unless asked to refresh (or always, with `stale`).
    final class Provider: Sendable {
        let asked = Mutex<[Bool]>([])
        let user: Int64
        let stale: Bool
        init(user: Int64, stale: Bool = false) {
            self.user = user
            self.stale = stale
        }
        var provide: CounterServiceClient.TokenProvider {
            { refresh in
                self.asked.withLock { $0.append(refresh) }
                return ClientUserTokenTests.signer.token(user: self.user, lifetime: refresh && !self.stale ? 3_600 : -3_600)
            }
        }
    }

    static func client(_ http: HTTPHarness, _ provider: @escaping CounterServiceClient.TokenProvider) -> CounterServiceClient {
        CounterServiceClient(configuration: .init(baseURL: URL(string: "http://127.0.0.1:\(http.port)")!, userToken: provider))
    }

    @Test("the lists as AsyncSequences of pages: a post's likers (as the user and with the API token), the signed-in user's likes, a user's likes")
    func listPages() async throws {
        let http = try await HTTPHarness.start(posts: 3, users: try UserRoutesTests.users())
        let post = http.posts[0]
        let me = Int64.random(in: 1_000...1_000_000_000) * 1_000
        let service = ClientIntegrationTests.client(http)
        for user in (me + 1)...(me + 45) { _ = try await service.like(post: post, user: user) }
        for other in http.posts {
            _ = try await service.like(post: other, user: me)
            // Likes of one millisecond tie and list by post id: keep them apart, so the order
            // below is the order of the likes.
            try await Task.sleep(for: .milliseconds(3))
        }
        let user = Self.client(http) { _ in Self.signer.token(user: me, lifetime: 3_600) }
        var pages: [LikersPage] = []
        for try await page in user.likers(of: post, pageSize: 20) { pages.append(page) }
        #expect(pages.map(\.likers.count) == [20, 20, 6] && pages.last?.nextCursor == nil)
        #expect(Set(pages.flatMap(\.likers).map(\.userID)) == Set((me...(me + 45))))
        #expect(pages.allSatisfy { $0.likesCount == 46 })
        var viaService: [Int64] = []
        for try await page in service.likers(of: post, pageSize: 100) { viaService += page.likers.map(\.userID) }
        #expect(viaService == pages.flatMap(\.likers).map(\.userID))
        // Leaving the loop after a page is fine: the sequence asks for a page only when iterated.
        var first: LikersPage?
        for try await page in user.likers(of: post, pageSize: 1) {
            first = page
            break
        }
        #expect(first?.likers.count == 1 && first?.nextCursor != nil)

        var mine: [Int64] = []
        for try await page in user.myLikes(pageSize: 2) { mine += page.likes.map(\.postID) }
        #expect(mine == http.posts.reversed(), "newest first")
        var theirs: [Int64] = []
        for try await page in service.likes(ofUser: me) { theirs += page.likes.map(\.postID) }
        #expect(theirs == mine)
        await #expect(throws: CounterClientError.self) { _ = try await service.likersPage(of: post, limit: 101) }
        await #expect(throws: CounterClientError.self) { _ = try await service.likersPage(of: post, cursor: "a b") }
        do {
            _ = try await service.likersPage(of: post, cursor: "bm90")
            Issue.record("a cursor the service did not give is refused")
        } catch {
            #expect(error.serverCode == "invalid_cursor", "\(error)")
        }
        await http.stop()
    }

    @Test("a refused token is refreshed once and the call sent again — a toggle too, which then happens once")
    func refreshOn401() async throws {
        let http = try await HTTPHarness.start(users: try UserRoutesTests.users())
        let post = http.posts[0]
        let provider = Provider(user: 31)
        let client = Self.client(http, provider.provide)
        let toggled = try await client.toggle(post: post)
        #expect(toggled.userID == 31 && toggled.isLiked && toggled.likesCount == 1)
        #expect(provider.asked.withLock { $0 } == [false, true])
        #expect(try await client.status(post: post).isLiked)

        // A provider whose fresh token is refused too: the 401 comes back after one retry.
        let stale = Provider(user: 32, stale: true)
        do {
            _ = try await Self.client(http, stale.provide).like(post: post)
            Issue.record("an expired token was accepted")
        } catch {
            #expect(error.status == 401 && error.serverCode == "token_expired", "\(error)")
        }
        #expect(stale.asked.withLock { $0 } == [false, true])
        // A provider that fails: nothing is sent.
        struct SignedOut: Error {}
        do {
            _ = try await Self.client(http, { _ in throw SignedOut() }).like(post: post)
            Issue.record("a call without a token went out")
        } catch {
            #expect(error == .unauthenticated("the token provider failed: SignedOut()"), "\(error)")
        }
        // Without a provider, the calls as a user are refused before sending.
        let backend = CounterServiceClient(
            configuration: .init(baseURL: URL(string: "http://127.0.0.1:\(http.port)")!, apiToken: HTTPHarness.apiToken))
        await #expect(throws: CounterClientError.self) { try await backend.like(post: post) }
        #expect(try await backend.count(post: post).likesCount == 1)
        await http.stop()
    }

    @Test("an app's feed and buttons run as the signed-in user: the feed without user_id, taps on the user routes")
    func appModels() async throws {
        let http = try await HTTPHarness.start(users: try UserRoutesTests.users())
        let client = Self.client(http) { _ in Self.signer.token(user: 41) }
        let feed = LikeFeedModel(client: client)
        let buttons = try await feed.load(posts: http.posts)
        #expect(buttons.count == http.posts.count && buttons.allSatisfy { !$0.isLiked && $0.userID == nil })
        buttons[1].tap()
        await buttons[1].settled()
        #expect(buttons[1].isLiked && buttons[1].likesCount == 1)
        #expect(try await client.status(post: http.posts[1]).isLiked)
        // The service agrees it was user 41.
        #expect(try await http.send("GET", "/v1/posts/\(http.posts[1])/likes/41").text.contains(#""is_liked":true"#))
        let again = try await feed.load(posts: [http.posts[1]])
        #expect(again.first === buttons[1] && again.first?.isLiked == true)
        await http.stop()
    }
}
