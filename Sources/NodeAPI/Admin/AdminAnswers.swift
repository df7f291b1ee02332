import CounterWire
import NodeHTTP
import Persistence

/// The admin routes for reconcile and dead letters: their request bodies checked, their answers
/// as wire types.
enum AdminAnswers {
    /// `POST /admin/reconcile` with `{"post_ids":[…]}` or `{"after":0,"limit":1000}`, and
    /// `"repair":true` to fix what drifted.
    static func reconcile(_ body: [UInt8], _ reconciler: Reconciler) async throws -> HTTPResponse {
        let request = try reconcileRequest(body)
        let report = try await reconciler.reconcile(
            posts: request.postIDs, after: request.after ?? 0, limit: request.limit ?? 1_000,
            repair: request.repair ?? false)
        return .json(report)
    }

    /// The body of a reconcile call (one node's or the cluster's), checked.
    static func reconcileRequest(_ body: [UInt8]) throws -> ReconcileRequest {
        let request = try RequestBody.decode(ReconcileRequest.self, body, idMembers: ["post_ids"])
        if let posts = request.postIDs {
            guard !posts.isEmpty, posts.count <= Reconciler.maximumBatch else {
                throw RequestError(code: .invalidBody, message: "post_ids must hold 1 to \(Reconciler.maximumBatch) ids")
            }
            guard posts.allSatisfy({ $0 > 0 }) else {
                throw RequestError(code: .invalidID, message: "post_ids holds a value that is not a positive 64-bit integer")
            }
        }
        let after = request.after ?? 0
        guard after >= 0 else { throw RequestError(code: .invalidBody, message: "after must be a post id or 0") }
        let limit = request.limit ?? 1_000
        guard (1...Reconciler.maximumBatch).contains(limit) else {
            throw RequestError(code: .invalidBody, message: "limit must be from 1 to \(Reconciler.maximumBatch)")
        }
        return request
    }

    /// `GET /admin/dead-letters`.
    static func letters(_ letters: [DeadLetters.Letter]) -> HTTPResponse {
        .json(DeadLetterList(deadLetters: letters.map { DeadLetter(id: $0.id.description, fields: $0.fields) }))
    }

    /// `POST /admin/dead-letters/replay` with `{"ids":["…"]}`, or an empty body for all.
    static func replay(_ body: [UInt8], _ deadLetters: DeadLetters) async throws -> HTTPResponse {
        let ids = try replayIDs(body)
        let outcome = try await deadLetters.replay(ids: ids)
        return .json(
            ReplayResult(
                replayed: outcome.replayed.map(\.description),
                superseded: outcome.superseded.map(\.description),
                failed: outcome.failed.map { ReplayResult.Failure(id: $0.0.description, reason: $0.1) }))
    }

    /// The letters a replay call (one node's or the cluster's) names; `nil` for all.
    static func replayIDs(_ body: [UInt8]) throws -> [LetterID]? {
        body.isEmpty ? nil : try letterIDs(body, required: false)
    }

    /// `POST /admin/dead-letters/drop` with `{"ids":["…"]}`.
    static func drop(_ body: [UInt8], _ deadLetters: DeadLetters) async throws -> HTTPResponse {
        let ids = try letterIDs(body, required: true) ?? []
        return .json(DropResult(dropped: try await deadLetters.drop(ids: ids)))
    }

    private static func letterIDs(_ body: [UInt8], required: Bool) throws -> [LetterID]? {
        let selection = try RequestBody.decode(DeadLetterSelection.self, body, idMembers: ["ids"])
        guard let values = selection.ids else {
            if required { throw RequestError(code: .invalidBody, message: #"expected {"ids":["<entry id>",…]}"#) }
            return nil
        }
        guard !values.isEmpty else {
            throw RequestError(code: .invalidBody, message: "ids must be a non-empty array of entry ids")
        }
        return try values.map { text in
            // Up to 19 digits a part, as the API document's pattern says: every such value fits
            // (a real id's milliseconds have 13), so the document and the node agree exactly.
            guard text.split(separator: "-", omittingEmptySubsequences: false).allSatisfy({ $0.utf8.count <= 19 }),
                let id = LetterID(text)
            else {
                throw RequestError(code: .invalidID, message: "ids must be entry ids like \"1700000000000-0\"")
            }
            return id
        }
    }
}
