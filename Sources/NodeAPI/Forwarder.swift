import CounterCore
import Foundation
import NodeCluster
import NodeHTTP
import Synchronization

/// Sends a request for a slot another node owns on to that node, once, over pooled keep-alive
/// connections (`PeerClient`), and returns its answer.
///
/// The owner is read from the slot map (`ClusterMember.map`). An owner that answers `421` (the
/// slot moved meanwhile) did nothing: the map is read again and the request sent once more. A
/// request that reached no node (connection refused) is sent again the same way. A toggle whose
/// connection broke after it was sent may have run: it is not sent again and the caller gets
/// 503 `outcome_unknown`; likes, unlikes and reads are safe to repeat and are.
final class Forwarder: Sendable {
    private let member: ClusterMember
    private let peers: PeerClient
    private let forwardedCount = Atomic<Int>(0)
    private let misdirectedCount = Atomic<Int>(0)

    /// How long a request waits for its slot to have a live owner in the map.
    private let ownerWait: Duration

    /// - Throws: `HTTPServerError` when the connections' loop cannot be made.
    init(member: ClusterMember, ownerWait: Duration) throws {
        self.member = member
        self.ownerWait = ownerWait
        // Requests for one owner under way together go as one batch (`ForwardedBatches`): a
        // forward alone cost more CPU, on both nodes, than the toggle it carried.
        self.peers = try PeerClient(
            batching: .init(
                target: ForwardedBatches.path, headers: [("Counter-Forwarded-By", member.configuration.nodeID)]))
    }

    /// Requests sent on to their owner.
    var forwarded: Int { forwardedCount.load(ordering: .relaxed) }
    /// Requests answered `421` here (forwarded to this node for a slot it does not own).
    var misdirected: Int { misdirectedCount.load(ordering: .relaxed) }

    /// The `421` a node answers for a request forwarded to it for `slot`, which it does not own
    /// (or `503` when no live node owns it).
    func misdirectedResponse(slot: UInt16) -> HTTPResponse {
        misdirectedCount.add(1, ordering: .relaxed)
        guard let owner = member.map.owner(of: slot), owner.id != member.configuration.nodeID else {
            return .error(
                .noOwner, message: "no live node owns slot \(slot) now (a takeover is under way); retry",
                retryAfterSeconds: 1)
        }
        return .error(
            .notOwner, message: "slot \(slot) is owned by node \(owner.id) at \(owner.advertiseURL); nothing was done here",
            headers: ["Counter-Owner": owner.advertiseURL])
    }

    /// `request`'s answer from the owner of `slot`. `mayRepeat`: whether running it twice is
    /// harmless (everything but a toggle). `locally` runs it on this node, for when the map comes
    /// to name this node as the owner (it took the slot over meanwhile); it answers `nil` when
    /// the slot is not served here after all.
    func forward(
        _ request: HTTPRequest, slot: UInt16, mayRepeat: Bool,
        locally: @Sendable () async -> HTTPResponse? = { nil }
    ) async -> HTTPResponse {
        let me = member.configuration.nodeID
        var attempt = 0
        let deadline = ContinuousClock.now + ownerWait
        while true {
            if member.map.owner(of: slot)?.id == me, let response = await locally() { return response }
            guard let owner = member.map.owner(of: slot), owner.id != me else {
                // No other live node owns the slot in the map: it is between owners (a node left
                // or died, or the map is behind). Wait for one, briefly, reading the map again.
                if ContinuousClock.now < deadline && !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(50))
                    try? await member.refreshMapUnlessFresh()
                    continue
                }
                return .error(
                    .noOwner, message: "no other live node owned slot \(slot) within \(ownerWait) (a move or takeover is under way); retry",
                    retryAfterSeconds: 1)
            }
            attempt += 1
            forwardedCount.add(1, ordering: .relaxed)
            switch await send(request, to: owner.advertiseURL, from: me, batchable: true) {
            case .answered(let response):
                if response.status == 421 && attempt == 1 {
                    try? await member.refreshMap()
                    continue
                }
                return response
            case .notSent(let why):
                if attempt == 1 {
                    try? await member.refreshMap()
                    continue
                }
                return .error(
                    .unavailable, message: "the owner of slot \(slot) (\(owner.id)) cannot be reached: \(why)",
                    retryAfterSeconds: 1)
            case .broken(let why):
                if mayRepeat && attempt == 1 { continue }
                return .error(
                    mayRepeat ? .unavailable : .outcomeUnknown,
                    message: mayRepeat
                        ? "the owner of slot \(slot) (\(owner.id)) did not answer: \(why)"
                        : "the connection to the owner of slot \(slot) (\(owner.id)) broke after the toggle was sent: it may or may not have run; read the state before toggling again (\(why))",
                    retryAfterSeconds: 1)
            }
        }
    }

    /// `GET target` on the node listening at `base`, with the credentials of `request` (the
    /// caller's), marked as sent by this node: its answer, or why there is none.
    func get(_ target: String, credentialsOf request: HTTPRequest, from base: String) async -> Result<HTTPResponse, PeerFailure> {
        let asked = HTTPRequest(
            method: "GET", path: target, authorization: request.authorization,
            headers: request.actingUser.map { ["counter-user": $0] } ?? [:])
        switch await send(asked, to: base, from: member.configuration.nodeID) {
        case .answered(let response): return .success(response)
        case .notSent(let why), .broken(let why): return .failure(PeerFailure(why: why))
        }
    }

    /// Why a peer gave no answer.
    struct PeerFailure: Error {
        let why: String
    }

    private enum Outcome {
        case answered(HTTPResponse)
        /// Nothing reached the owner.
        case notSent(String)
        /// Sent, but no answer came back: it may have run.
        case broken(String)
    }

    private func send(_ request: HTTPRequest, to base: String, from me: String, batchable: Bool = false) async -> Outcome {
        var headers: [(name: String, value: String)] = [("Counter-Forwarded-By", me)]
        if let authorization = request.authorization { headers.append(("Authorization", authorization)) }
        if let actingUser = request.actingUser { headers.append(("Counter-User", actingUser)) }
        if !request.body.isEmpty { headers.append(("Content-Type", "application/json")) }
        let outgoing = PeerClient.Request(
            method: request.method, target: request.path + (request.rawQuery.isEmpty ? "" : "?" + request.rawQuery),
            headers: headers, body: request.body)
        switch await peers.send(outgoing, to: base, batchable: batchable) {
        case .answered(let answer):
            var passed: [String: String] = [:]
            if let value = answer.headers["retry-after"] { passed["Retry-After"] = value }
            if let value = answer.headers["counter-owner"] { passed["Counter-Owner"] = value }
            return .answered(
                HTTPResponse(
                    status: answer.status, contentType: answer.headers["content-type"] ?? "application/json",
                    headers: passed, body: answer.body))
        case .notSent(let why): return .notSent(why)
        case .broken(let why): return .broken(why)
        }
    }
}
