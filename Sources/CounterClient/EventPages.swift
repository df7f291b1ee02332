import CounterWire

/// The change events as they are committed, page after page (`CounterServiceClient.events`): an
/// `AsyncSequence` that long-polls for the next page after the last one's `nextAfter`, yields
/// only pages with events, and never ends by itself. Stop the loop to stop.
///
/// ```swift
/// for try await page in client.events(after: savedCursor) {
///     for event in page.events { notify(event) }
///     try save(page.nextAfter)   // after handling: at least once, never skipped
/// }
/// ```
public struct EventPages: AsyncSequence, Sendable {
    public typealias Element = EventsPage

    let after: Int64
    let fetch: @Sendable (Int64) async throws(CounterClientError) -> EventsPage

    init(after: Int64, fetch: @escaping @Sendable (Int64) async throws(CounterClientError) -> EventsPage) {
        self.after = after
        self.fetch = fetch
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(pages: self, after: after)
    }

    public struct AsyncIterator: AsyncIteratorProtocol, Sendable {
        let pages: EventPages
        /// The cursor of the next request: the last page's `nextAfter`.
        public private(set) var after: Int64

        init(pages: EventPages, after: Int64) {
            self.pages = pages
            self.after = after
        }

        /// The next page with events (waiting as long as it takes); `nil` once the task is
        /// cancelled. A failure throws, and calling again asks from the same cursor.
        public mutating func next() async throws -> EventsPage? {
            while !Task.isCancelled {
                let page = try await pages.fetch(after)
                after = page.nextAfter
                if !page.events.isEmpty { return page }
            }
            return nil
        }
    }
}
