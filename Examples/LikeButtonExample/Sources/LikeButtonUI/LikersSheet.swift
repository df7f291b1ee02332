#if canImport(SwiftUI)
    import CounterClient
    import SwiftUI

    /// "Liked by …": the post's likers, newest first, a page at a time (`client.likers(of:)`, an
    /// `AsyncSequence` of pages). The next page is asked when the last row appears; a like from a
    /// moment ago is already there (the node lays what still waits for PostgreSQL over its rows).
    public struct LikersSheet: View {
        private let post: Int64
        private let client: CounterServiceClient
        private let pageSize: Int
        @State private var likers: [Liker] = []
        @State private var count: Int64?
        @State private var pages: ListPages<LikersPage>.AsyncIterator?
        @State private var loading = false
        @State private var finished = false
        @State private var failure: String?

        public init(post: Int64, client: CounterServiceClient, pageSize: Int = 30) {
            self.post = post
            self.client = client
            self.pageSize = pageSize
        }

        public var body: some View {
            NavigationStack {
                List {
                    ForEach(likers, id: \.userID) { liker in
                        HStack {
                            Image(systemName: "heart.fill").foregroundStyle(.red)
                            Text("User \(liker.userID)")
                            Spacer()
                            Text(Self.time(liker.likedAt)).font(.footnote).foregroundStyle(.secondary)
                        }
                        .onAppear { if liker.userID == likers.last?.userID { Task { await loadMore() } } }
                    }
                    if loading { ProgressView() }
                    if let failure { Text(failure).font(.footnote).foregroundStyle(.secondary) }
                }
                .navigationTitle(count.map { "Liked by \($0)" } ?? "Likes")
                .refreshable { await reload() }
                .task { await reload() }
            }
        }

        private func reload() async {
            pages = client.likers(of: post, pageSize: pageSize).makeAsyncIterator()
            likers = []
            finished = false
            await loadMore()
        }

        private func loadMore() async {
            guard !loading, !finished, var iterator = pages else { return }
            loading = true
            defer { loading = false }
            do {
                if let page = try await iterator.next() {
                    count = page.likesCount
                    // A liker who liked again between pages is on an earlier page already.
                    let shown = Set(likers.map(\.userID))
                    likers += page.likers.filter { !shown.contains($0.userID) }
                    finished = page.nextCursor == nil
                } else {
                    finished = true
                }
                pages = iterator
                failure = nil
            } catch {
                guard !Task.isCancelled else { return }
                failure = "Could not load the likes: \(error)"
            }
        }

        /// `2026-12-04T05:12:33.123Z` as the device shows times.
        private static func time(_ text: String) -> String {
            guard let milliseconds = LikeTime.milliseconds(text) else { return text }
            let date = Date(timeIntervalSince1970: Double(milliseconds) / 1_000)
            return date.formatted(.relative(presentation: .named))
        }
    }
#endif
