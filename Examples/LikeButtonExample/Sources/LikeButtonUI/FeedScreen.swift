#if canImport(SwiftUI)
    import CounterClient
    import SwiftUI

    /// A small feed: one `POST /v1/posts/query` loads counts and the user's likes for every row, then
    /// each row's heart is its own `LikeButtonModel`; each row opens its post's likers
    /// (`LikersSheet`). Pull to refresh reloads them (rows with a request in flight keep their state).
    public struct FeedScreen: View {
        @State private var feed: LikeFeedModel
        @State private var failure: String?
        @State private var loaded = false
        @State private var likersOf: LikersOf?
        private let posts: [Int64]
        private let client: CounterServiceClient

        /// - Parameter user: `nil` (an app): the signed-in user of `client`'s `userToken`.
        public init(posts: [Int64], user: Int64? = nil, client: CounterServiceClient) {
            self.posts = posts
            self.client = client
            _feed = State(initialValue: LikeFeedModel(user: user, client: client))
        }

        public var body: some View {
            List(posts, id: \.self) { post in
                HStack {
                    Text("Post \(post)")
                    Spacer()
                    // "Liked by …": the post's likers, newest first.
                    Button {
                        likersOf = LikersOf(post: post)
                    } label: {
                        Image(systemName: "person.2")
                    }
                    .buttonStyle(.borderless)
                    if let button = feed.buttons[post] {
                        HeartButton(model: button)
                    } else if loaded {
                        Text("–").foregroundStyle(.secondary) // not known to the service, or not loaded
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
            .sheet(item: $likersOf) { shown in LikersSheet(post: shown.post, client: client) }
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
    /// The post whose likers the sheet shows.
    private struct LikersOf: Identifiable {
        let post: Int64
        var id: Int64 { post }
    }
#endif
