#if canImport(SwiftUI)
import CounterClient
import SwiftUI

/// A small feed: one `POST /v1/posts/query` loads counts and the user's likes for every row, then
/// each row's heart is its own `LikeButtonModel`. Pull to refresh reloads them (rows with a
/// request in flight keep their state).
public struct FeedScreen: View {
    @State private var feed: LikeFeedModel
    @State private var failure: String?
    @State private var loaded = false
    private let posts: [Int64]

    /// - Parameter user: `nil` (an app): the signed-in user of `client`'s `userToken`.
    public init(posts: [Int64], user: Int64? = nil, client: CounterServiceClient) {
        self.posts = posts
        _feed = State(initialValue: LikeFeedModel(user: user, client: client))
    }

    public var body: some View {
        List(posts, id: \.self) { post in
            HStack {
                Text("Post \(post)")
                Spacer()
                if let button = feed.buttons[post] {
                    HeartButton(model: button)
                } else if loaded {
                    Text("–").foregroundStyle(.secondary)   // not known to the service, or not loaded
                } else {
                    ProgressView()
                }
            }
        }
        .overlay(alignment: .bottom) {
            if let failure {
                Text(failure).font(.footnote).padding(8).background(.thinMaterial, in: Capsule()).padding()
            }
        }
        .task { await load() }
        .refreshable { await load() }
    }

    private func load() async {
        do {
            try await feed.load(posts: posts)
            failure = nil
        } catch {
            // Leaving the screen cancels the load: not a failure to show.
            guard !Task.isCancelled else { return }
            failure = "Could not load likes: \(error)"
        }
        loaded = true
    }
}
#endif
