import NodeTestSupport
import CounterClient
import Foundation
@testable import NodeAPI
import Synchronization
import Testing
import UserTokens

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
        let backend = CounterServiceClient(configuration: .init(baseURL: URL(string: "http://127.0.0.1:\(http.port)")!, apiToken: HTTPHarness.apiToken))
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
