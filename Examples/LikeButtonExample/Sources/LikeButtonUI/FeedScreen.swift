#if canImport(SwiftUI)
    import CounterClient
    import SwiftUI

    /// A small feed: one `POST /v1/posts/query` loads counts and the user's likes for every row, then
    /// each row's heart is its own `LikeButtonModel`; each row opens its post's likers
    /// (`LikersSheet`). Pull to refresh reloads them (rows with a request in flight keep their state).
    /// Given `reactions` (a deployment with several kinds), each row has a `ReactionPicker` instead
    /// of the heart, its `ReactionPickerModel` seeded by the same one query (`include` `reactions`).
    public struct FeedScreen: View {
        @State private var feed: LikeFeedModel
        @State private var reactionFeed: ReactionFeedModel?
        @State private var failure: String?
        @State private var loaded = false
        @State private var likersOf: LikersOf?
        private let posts: [Int64]
        private let client: CounterServiceClient
        private let reactions: ReactionOptions?

        /// - Parameters:
        ///   - user: `nil` (an app): the signed-in user of `client`'s `userToken`.
        ///   - reactions: the kinds the deployment takes and how many a user may hold; `nil` (likes
        ///     only): a heart per row.
        public init(posts: [Int64], user: Int64? = nil, client: CounterServiceClient, reactions: ReactionOptions? = nil) {
            self.posts = posts
            self.client = client
            self.reactions = reactions
            _feed = State(initialValue: LikeFeedModel(user: user, client: client))
            _reactionFeed = State(initialValue: reactions.map { ReactionFeedModel(mode: $0.mode, user: user, client: client) })
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
                    if let reactions, let reactionFeed {
                        if let picker = reactionFeed.pickers[post] {
                            ReactionPicker(model: picker, options: reactions)
                        } else {
                            placeholder
                        }
                    } else if let button = feed.buttons[post] {
                        HeartButton(model: button)
                    } else {
                        placeholder
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

        /// A row without a heart or a picker: the post is not known to the service, or not loaded yet.
        @ViewBuilder private var placeholder: some View {
            if loaded {
                Text("–").foregroundStyle(.secondary)
            } else {
                ProgressView()
            }
        }

        private func load() async {
            do {
                if let reactionFeed { try await reactionFeed.load(posts: posts) } else { try await feed.load(posts: posts) }
                failure = nil
            } catch {
                // Leaving the screen cancels the load: not a failure to show.
                guard !Task.isCancelled else { return }
                failure = "Could not load \(reactions == nil ? "likes" : "reactions"): \(error)"
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
