#if canImport(SwiftUI)
import CounterClient
import LikeButtonUI
import SwiftUI
#if os(macOS)
import AppKit
#endif

/// Posts 1–10 of a node started with `scripts/run` (which creates them), as user 7.
/// Set COUNTER_URL and COUNTER_API_TOKEN in the scheme's environment for another node.
@main
struct LikeButtonExampleApp: App {
    let client = CounterServiceClient(configuration: .init(
        baseURL: URL(string: ProcessInfo.processInfo.environment["COUNTER_URL"] ?? "http://127.0.0.1:8080")!,
        apiToken: ProcessInfo.processInfo.environment["COUNTER_API_TOKEN"]))

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
                FeedScreen(posts: Array(1...10), user: 7, client: client)
                    .navigationTitle("Feed")
            }
        }
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
