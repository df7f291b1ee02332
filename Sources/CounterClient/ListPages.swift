import CounterWire

/// The pages of a list (a post's likers, a user's likes), newest first, as an `AsyncSequence`:
/// each page is asked when the loop wants the next, with the cursor of the one before, until a
/// page says there is no more. Stop the loop to stop asking.
///
/// ```swift
/// for try await page in client.likers(of: post) {
///     show(page.likers)
///     if page.likers.count >= enough { break }
/// }
/// ```
public struct ListPages<Page: Sendable>: AsyncSequence, Sendable {
    public typealias Element = Page

    let next: @Sendable (Page) -> String?
    let fetch: @Sendable (String?) async throws(CounterClientError) -> Page

    init(next: @escaping @Sendable (Page) -> String?, fetch: @escaping @Sendable (String?) async throws(CounterClientError) -> Page) {
        self.next = next
        self.fetch = fetch
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(pages: self)
    }

    public struct AsyncIterator: AsyncIteratorProtocol, Sendable {
        let pages: ListPages
        var cursor: String?
        var finished = false

        init(pages: ListPages) {
            self.pages = pages
        }

        /// The next page; `nil` after the last. A failed page ends nothing: calling again asks
        /// for it once more.
        public mutating func next() async throws -> Page? {
            guard !finished else { return nil }
            let page = try await pages.fetch(cursor)
            cursor = pages.next(page)
            finished = cursor == nil
            return page
        }
    }
}
