import NodeCluster
import NodeHTTP
import ShardRouter
import WritePath

/// The step around the handlers of routes on one post (`Route.Forwarding.toOwner`): when the
/// write path says the post's slot is not served here (`notOwner`), the request is answered by
/// the slot's owner — or, when the map (read again) says the slot is this node's (it may be on
/// its way here: the next round adopts it), by the handler run here again, waiting for the slot;
/// or, for a request that was itself forwarded here, `421` with the owner's URL. The one place
/// "not the owner, so forward" is decided, for the hot like routes and the others alike.
struct SlotForwarding: Sendable {
    /// `nil`: a write path that is the only writer, where `notOwner` is the answer (`503 no_owner`).
    let forwarder: Forwarder?
    let member: ClusterMember?
    let errors: ErrorAnswers

    /// Whether a `notOwner` of a route that forwards is sent on (a node of a cluster).
    var isOn: Bool { forwarder != nil }

    /// `handler`'s answer to `request`, its errors answered; a `notOwner` sent on to the owner.
    func around(_ request: RouteRequest, _ handler: @escaping @Sendable (RouteRequest) async throws -> HTTPResponse) async -> HTTPResponse {
        do {
            return try await handler(request)
        } catch let error as CounterError where error.code == .notOwner && isOn && request.route.forwarding != .none {
            return await elsewhere(request, handler)
        } catch {
            return errors.answer(error, route: request.route.label)
        }
    }

    /// The answer for `request`, whose post's slot this node does not serve: see the type.
    func elsewhere(_ request: RouteRequest, _ handler: @escaping @Sendable (RouteRequest) async throws -> HTTPResponse) async -> HTTPResponse {
        let slot = HashSlot(post: request.ids.post).rawValue
        guard let forwarder, let member else { return .error(for: CounterError.notOwner(slot)) }
        let locally: @Sendable (_ waitingForSlot: Bool) async -> HTTPResponse? = { waiting in
            await answeredHere { try await handler(request.waiting(waiting)) }
        }
        let me = member.configuration.nodeID
        let forwardedHere = request.http.forwardedBy != nil
        if member.map.owner(of: slot)?.id == me || forwardedHere {
            // This node's map says the slot is its own, or the sender's does.
            try? await member.refreshMapUnlessFresh()
            if member.map.owner(of: slot)?.id == me, let response = await locally(true) { return response }
        }
        if forwardedHere { return forwarder.misdirectedResponse(slot: slot) }
        let repeatable = request.route.forwarding == .toOwner(repeatable: true)
        return await forwarder.forward(request.http, slot: slot, mayRepeat: repeatable) { await locally(false) }
    }

    /// `perform`'s answer, its errors as the API phrases them; `nil` when the slot turns out not
    /// to be served here (`notOwner`).
    private func answeredHere(_ perform: () async throws -> HTTPResponse) async -> HTTPResponse? {
        do {
            return try await perform()
        } catch let error as CounterError where error.code == .notOwner {
            return nil
        } catch {
            return errors.answer(error, route: "forwarded")
        }
    }

    /// The codes this step answers on `route`.
    static func codes(of route: Route) -> Set<ErrorCode> {
        switch route.forwarding {
        case .none: return []
        // 421 to a request forwarded here by mistake; no owner within the wait, or one that
        // cannot be reached; a toggle whose connection broke after it was sent.
        case .toOwner(let repeatable):
            return repeatable ? [.notOwner, .noOwner, .unavailable] : [.notOwner, .noOwner, .unavailable, .outcomeUnknown]
        }
    }
}
