import Persistence

/// Request bodies and JSON answers of the admin routes for reconcile and dead letters.
enum AdminAnswers {
    /// `POST /admin/reconcile` with `{"post_ids":[…]}` or `{"after":0,"limit":1000}`, and
    /// `"repair":true` to fix what drifted.
    static func reconcile(_ body: [UInt8], _ reconciler: Reconciler) async throws -> HTTPResponse {
        let members = try object(body)
        try allowOnly(members, ["post_ids", "after", "limit", "repair"])
        var posts: [Int64]?
        if let ids = members["post_ids"] {
            guard case .array(let values) = ids, !values.isEmpty, values.count <= Reconciler.maximumBatch else {
                throw RequestError(code: "invalid_body", message: "post_ids must hold 1 to \(Reconciler.maximumBatch) ids")
            }
            posts = try values.map { value in
                guard let id = value.int64, id > 0 else { throw RequestError(code: "invalid_id", message: "post_ids holds a value that is not a positive 64-bit integer") }
                return id
            }
        }
        let after = try members["after"].map { value -> Int64 in
            guard let id = value.int64, id >= 0 else { throw RequestError(code: "invalid_body", message: "after must be a post id or 0") }
            return id
        } ?? 0
        let limit = try members["limit"].map { value -> Int in
            guard let number = value.int64, (1...Int64(Reconciler.maximumBatch)).contains(number) else {
                throw RequestError(code: "invalid_body", message: "limit must be from 1 to \(Reconciler.maximumBatch)")
            }
            return Int(number)
        } ?? 1_000
        var repair = false
        if let value = members["repair"] {
            guard case .bool(let flag) = value else { throw RequestError(code: "invalid_body", message: "repair must be true or false") }
            repair = flag
        }
        let report = try await reconciler.reconcile(posts: posts, after: after, limit: limit, repair: repair)
        var writer = JSONWriter()
        writer.objectStart()
        writer.field("checked", report.checked)
        writer.key("drifted")
        writer.arrayStart()
        for drift in report.drifted {
            writer.objectStart()
            writer.field("post_id", drift.postID)
            writer.field("likes_count", drift.likesCount)
            writer.field("likes_rows", drift.likesRows)
            writer.objectEnd()
        }
        writer.arrayEnd()
        writer.key("redis_drifted")
        writer.arrayStart()
        for drift in report.redisDrifted {
            writer.objectStart()
            writer.field("post_id", drift.postID)
            writer.field("redis_count", drift.redisCount)
            writer.field("likes_rows", drift.likesRows)
            writer.objectEnd()
        }
        writer.arrayEnd()
        writer.field("redis_pending", report.redisPending)
        writer.field("repaired", report.repaired)
        writer.field("redis_repaired", report.redisRepaired)
        if let next = report.nextAfter { writer.field("next_after", next) } else { writer.nullField("next_after") }
        writer.objectEnd()
        return HTTPResponse(status: 200, body: writer.bytes)
    }

    static func letters(_ letters: [DeadLetters.Letter]) -> HTTPResponse {
        var writer = JSONWriter()
        writer.objectStart()
        writer.key("dead_letters")
        writer.arrayStart()
        for letter in letters {
            writer.objectStart()
            writer.field("id", letter.id.description)
            for (name, value) in letter.fields.sorted(by: { $0.key < $1.key }) { writer.field(name, value) }
            writer.objectEnd()
        }
        writer.arrayEnd()
        writer.objectEnd()
        return HTTPResponse(status: 200, body: writer.bytes)
    }

    /// `POST /admin/dead-letters/replay` with `{"ids":["…"]}`, or an empty body for all.
    static func replay(_ body: [UInt8], _ deadLetters: DeadLetters) async throws -> HTTPResponse {
        let ids = body.isEmpty ? nil : try letterIDs(body, required: false)
        let outcome = try await deadLetters.replay(ids: ids)
        var writer = JSONWriter()
        writer.objectStart()
        writer.key("replayed")
        writer.arrayStart()
        for id in outcome.replayed { writer.value(id.description) }
        writer.arrayEnd()
        writer.key("failed")
        writer.arrayStart()
        for (id, reason) in outcome.failed {
            writer.objectStart()
            writer.field("id", id.description)
            writer.field("reason", reason)
            writer.objectEnd()
        }
        writer.arrayEnd()
        writer.objectEnd()
        return HTTPResponse(status: 200, body: writer.bytes)
    }

    /// `POST /admin/dead-letters/drop` with `{"ids":["…"]}`.
    static func drop(_ body: [UInt8], _ deadLetters: DeadLetters) async throws -> HTTPResponse {
        let ids = try letterIDs(body, required: true) ?? []
        let dropped = try await deadLetters.drop(ids: ids)
        var writer = JSONWriter()
        writer.objectStart()
        writer.field("dropped", dropped)
        writer.objectEnd()
        return HTTPResponse(status: 200, body: writer.bytes)
    }

    private static func letterIDs(_ body: [UInt8], required: Bool) throws -> [StreamEntryID]? {
        let members = try object(body)
        try allowOnly(members, ["ids"])
        guard let value = members["ids"] else {
            if required { throw RequestError(code: "invalid_body", message: #"expected {"ids":["<entry id>",…]}"#) }
            return nil
        }
        guard case .array(let values) = value, !values.isEmpty else {
            throw RequestError(code: "invalid_body", message: "ids must be a non-empty array of entry ids")
        }
        return try values.map { value in
            guard case .string(let text) = value, let id = StreamEntryID(text) else {
                throw RequestError(code: "invalid_id", message: "ids must be entry ids like \"1700000000000-0\"")
            }
            return id
        }
    }

    private static func object(_ body: [UInt8]) throws -> [String: JSONValue] {
        let value: JSONValue
        do { value = try JSONParser.parse(body) } catch {
            throw RequestError(code: "invalid_json", message: "the body is not valid JSON: \(error)")
        }
        guard case .object(let members) = value else { throw RequestError(code: "invalid_body", message: "expected a JSON object") }
        return members
    }

    private static func allowOnly(_ members: [String: JSONValue], _ names: Set<String>) throws {
        if let unknown = members.keys.first(where: { !names.contains($0) }) {
            throw RequestError(code: "invalid_body", message: "unknown member \"\(unknown)\"")
        }
    }
}
