import NodeHTTP

/// A request as a handler sees it: the HTTP request, its route, the ids in its path, and who
/// sent it (the middleware has checked all of these).
struct RouteRequest: Sendable {
    let http: HTTPRequest
    let route: Route
    let ids: PathIDs
    let caller: Caller
    /// The map names this node the owner of the post's slot, which it may not serve yet: the
    /// write path waits for it (up to `slotMoveWait`) rather than refuse `notOwner`. Set by
    /// `SlotForwarding` when it runs the handler here again.
    var waitingForSlot = false

    /// The query arguments, as sent.
    var query: [String: String] { http.query }
    var body: [UInt8] { http.body }

    /// The same request, waiting for its slot.
    func waiting(_ waiting: Bool) -> RouteRequest {
        var copy = self
        copy.waitingForSlot = waiting
        return copy
    }
}
