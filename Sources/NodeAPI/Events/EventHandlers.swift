import NodeHTTP

/// The change events' handler.
enum EventHandlers {
    /// `GET /v1/events`: a page after the cursor, long-polled with `wait`; `409 events_off` on a
    /// node whose flushes write none (its arguments are checked first).
    static func page(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        let arguments = try EventFeedAnswers.Arguments(request.query)
        guard api.service.configuration.events else {
            return .error(
                .eventsOff, message: "this node runs with --events false: its flushes write no change events; run every node with --events true")
        }
        return try await api.events.page(arguments)
    }
}
