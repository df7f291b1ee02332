#if canImport(SwiftUI)
    import CounterClient
    import LikeButtonUI
    import SwiftUI
    #if os(macOS)
        import AppKit
    #endif

    /// Posts 1–10 of a node started with `scripts/run` (which creates them), as the signed-in user
    /// of the token in COUNTER_USER_TOKEN (`scripts/run` prints one for user 7). The app holds only
    /// its user's token, never the service's API token: the node takes the user from the token.
    /// Set COUNTER_URL in the scheme's environment for another node, and COUNTER_REACTIONS (with
    /// COUNTER_REACTIONS_PER_USER) for a node started with reaction kinds (`DemoReactions`).
    @main
    struct LikeButtonExampleApp: App {
        let client = CounterServiceClient(
            configuration: .init(
                baseURL: URL(string: ProcessInfo.processInfo.environment["COUNTER_URL"] ?? "http://127.0.0.1:8080")!,
                userToken: SignedInUser.token))

        init() {
            #if os(macOS)
                // Started with `swift run` there is no app bundle: come to the front with a Dock icon.
                NSApplication.shared.setActivationPolicy(.regular)
                NSApplication.shared.activate(ignoringOtherApps: true)
            #endif
        }

        var body: some Scene {
            WindowGroup {
                NavigationStack {
                    FeedScreen(posts: Array(1...10), client: client, reactions: DemoReactions.options)
                        .navigationTitle("Feed")
                }
            }
        }
    }
    /// The reaction kinds the app offers: the node's `--reactions` and `--reactions-per-user`, which
    /// the app must hold the same (the node does not send them). The demo reads them from
    /// COUNTER_REACTIONS (`like,love,haha,wow,sad,angry`) and COUNTER_REACTIONS_PER_USER (`one`,
    /// the default, or `many`); unset, or `like` alone, the feed shows the heart (likes only).
    enum DemoReactions {
        static var options: ReactionOptions? {
            let environment = ProcessInfo.processInfo.environment
            let kinds = (environment["COUNTER_REACTIONS"] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { !$0.isEmpty }
            guard !kinds.isEmpty, kinds != ["like"] else { return nil }
            return ReactionOptions(kinds: kinds, mode: environment["COUNTER_REACTIONS_PER_USER"] == "many" ? .many : .one)
        }
    }

    /// Where the app's user token comes from. A real app asks its identity provider (Sign in with
    /// Apple, Auth0, Firebase, its own backend) and keeps the token in the Keychain; `refresh` is
    /// `true` after the node refused the last one (it expired), and a real app then renews it. The
    /// demo reads the token `scripts/run` printed.
    enum SignedInUser {
        struct NoToken: Error, CustomStringConvertible {
            var description: String { "set COUNTER_USER_TOKEN (scripts/run prints one) in the scheme's environment" }
        }

        @Sendable static func token(refresh: Bool) async throws -> String {
            guard let token = ProcessInfo.processInfo.environment["COUNTER_USER_TOKEN"], !token.isEmpty else { throw NoToken() }
            return token
        }
    }
#else
    // Linux: nothing to run; the example is for Apple platforms.
    @main
    struct LikeButtonExampleApp {
        static func main() {
            print("LikeButtonExample needs SwiftUI (iOS 17 / macOS 15); see Examples/LikeButtonExample/README.md")
        }
    }
#endif
