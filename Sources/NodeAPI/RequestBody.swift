import CounterWire

/// A request body the API cannot use, with the error code and a message that says what is wrong.
struct RequestError: Error {
    let code: ErrorCode
    let message: String
}

/// Request bodies read into their wire types and checked against the API's rules. A body that
/// is not JSON is `invalid_json`; one of the wrong shape or with unknown members `invalid_body`;
/// an id that is not a positive 64-bit integer `invalid_id`.
enum RequestBody {
    /// `POST /v1/posts/query` with the API token: 1 to 1,000 positive post ids and the positive
    /// id of the user whose likes the page shows — or none, for a logged-out viewer's page
    /// (counts only; `is_liked` is `false`), also when it says `"user_id":null`.
    static func feedQuery(_ body: [UInt8]) throws -> OwnFeedQuery {
        let query =
            try HotRequests.ownFeedQuery(body)
            ?? decode(
                OwnFeedQuery.self, body, idMembers: ["post_ids", "user_id"], shape: #"expected an object {"post_ids":[…],"user_id":…}"#,
                fractionCode: .invalidID)
        guard !query.postIDs.isEmpty, query.postIDs.count <= FeedQuery.maximumPosts else {
            throw RequestError(code: .invalidBody, message: "post_ids must hold 1 to \(FeedQuery.maximumPosts) ids, not \(query.postIDs.count)")
        }
        if let offset = query.postIDs.firstIndex(where: { $0 <= 0 }) {
            throw RequestError(code: .invalidID, message: "post_ids[\(offset)] is not a positive 64-bit integer")
        }
        if let user = query.userID, user <= 0 {
            throw RequestError(code: .invalidID, message: "user_id must be a positive 64-bit integer")
        }
        if let unknown = query.include?.first(where: { !FeedQuery.includable.contains($0) }) {
            throw RequestError(
                code: .invalidBody,
                message: "include may hold \(FeedQuery.includable.map { "\"\($0)\"" }.joined(separator: " and ")), not \"\(unknown)\"")
        }
        return query
    }

    /// `POST /v1/posts/query` from end user `user`: `user_id` may be left out; the answer is
    /// always the token's user's.
    /// - Throws: `RequestError`; `forbidden` when `user_id` names another user.
    static func ownFeedQuery(_ body: [UInt8], user: Int64) throws -> FeedQuery {
        let query = try feedQuery(body)
        if let named = query.userID, named != user {
            throw RequestError(code: .forbidden, message: "a user's token reads that user's likes only; user_id \(named) is not the token's user")
        }
        return FeedQuery(postIDs: query.postIDs, userID: user, include: query.include)
    }

    /// Decodes `body`; failures become `RequestError`s. A value of the wrong kind inside one of
    /// `idMembers` (a string or a fraction where an id goes) is `invalid_id`.
    /// - Parameter fractionCode: the code for a number with a fraction (`1.5`).
    static func decode<Body: Decodable>(
        _ type: Body.Type, _ body: [UInt8], idMembers: Set<String> = [],
        shape: String = "expected a JSON object", fractionCode: ErrorCode = .invalidBody
    ) throws -> Body {
        // Ids and counts are integers, and a whole number is one however it is written (`7.0`,
        // `7e0`: JSON Schema's `integer`); rewritten as plain digits here, as Foundation's decoder
        // would read them through a Double and could change a large id.
        var body = body
        switch WholeNumbers.normalized(body) {
        case .unchanged: break
        case .rewritten(let plain): body = plain
        case .fraction:
            throw RequestError(code: fractionCode, message: "numbers in this body are ids or counts: whole numbers (7 or 7.0), not fractions")
        }
        do {
            return try WireDecoder.decode(type, from: body)
        } catch let error as UnknownMember {
            throw RequestError(code: .invalidBody, message: error.description)
        } catch DecodingError.dataCorrupted(let context) where context.codingPath.isEmpty {
            throw RequestError(code: .invalidJSON, message: "the body is not valid JSON (or holds a number out of range)")
        } catch DecodingError.typeMismatch(_, let context) where context.codingPath.isEmpty {
            throw RequestError(code: .invalidBody, message: shape)
        } catch let error as DecodingError {
            let path: [any CodingKey]
            switch error {
            case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context): path = context.codingPath
            case .keyNotFound(let key, let context): path = context.codingPath + [key]
            @unknown default: path = []
            }
            // An element of an id array, or an id member itself, that is missing, null or not an
            // integer — but not an id array that is missing or not an array.
            let isID = path.first.map { idMembers.contains($0.stringValue) } ?? false
            let isArrayMember = error.expectsArray || (path.count == 1 && error.isKeyNotFound && path[0].stringValue.hasSuffix("_ids"))
            if isID && !isArrayMember && path.count <= 2 {
                throw RequestError(code: .invalidID, message: "\(WireDecoder.path(path)) must be a positive 64-bit integer")
            }
            throw RequestError(code: .invalidBody, message: WireDecoder.describe(error))
        } catch {
            throw RequestError(code: .invalidBody, message: "\(error)")
        }
    }
}

extension DecodingError {
    /// Whether an array was expected and something else (or null) found (`"post_ids":"1"`).
    fileprivate var expectsArray: Bool {
        switch self {
        case .typeMismatch(let type, _), .valueNotFound(let type, _): return String(describing: type).hasPrefix("Array")
        default: return false
        }
    }

    fileprivate var isKeyNotFound: Bool {
        if case .keyNotFound = self { return true }
        return false
    }
}
