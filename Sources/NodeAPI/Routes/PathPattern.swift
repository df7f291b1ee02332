import CounterCore

/// A route's path as declared: literal segments and ids, `/v1/posts/{post}/likes/{user}`. Its
/// text is also the route's metrics label and its path in the OpenAPI document. Pure.
struct PathPattern: Sendable, Equatable, CustomStringConvertible {
    /// An id in the path: a positive 64-bit integer in plain ASCII digits — or a reaction's
    /// kind, a name of `[a-z0-9_]{1,32}`.
    enum Parameter: Sendable, Equatable {
        case post, user, kind

        /// How a malformed one is named in the answer: `post id "x"`, `reaction kind "X"`.
        var what: String {
            switch self {
            case .post: return "post id"
            case .user: return "user id"
            case .kind: return "reaction kind"
            }
        }
    }

    enum Segment: Sendable, Equatable {
        case literal([UInt8])
        case id(Parameter)
    }

    let text: String
    let segments: [Segment]
    /// How many segments are literals: of two patterns a path fits, the one with more wins
    /// (`/v1/posts/query` over `/v1/posts/{post}`).
    let literalCount: Int

    /// - Precondition: `text` starts with `/`; an id segment is `{post}`, `{user}`, `{kind}` or
    ///   `{id}` (a post, as the seed's route spells it).
    init(_ text: String) {
        precondition(text.hasPrefix("/"), "a route's path starts with /: \(text)")
        self.text = text
        segments = text.dropFirst().split(separator: "/", omittingEmptySubsequences: false).map { part in
            switch part {
            case "{post}", "{id}": return .id(.post)
            case "{user}": return .id(.user)
            case "{kind}": return .id(.kind)
            default:
                precondition(
                    !part.isEmpty && !part.contains("{"), "segment \"\(part)\" of \(text) is neither a literal nor {post}, {user}, {kind}, {id}")
                return .literal(Array(part.utf8))
            }
        }
        literalCount = segments.filter { if case .literal = $0 { true } else { false } }.count
    }

    var description: String { text }

    /// Whether the literal segments of `path` (as many segments as this pattern has) are this
    /// pattern's.
    func literalsMatch(_ path: PathSegments) -> Bool {
        for index in segments.indices {
            if case .literal(let bytes) = segments[index], !path.segment(index, is: bytes) { return false }
        }
        return true
    }

    /// The ids in `path`, whose literals match; or the first that is not an id, named.
    func ids(_ path: PathSegments) -> Result<PathIDs, MalformedID> {
        var ids = PathIDs()
        for index in segments.indices {
            guard case .id(let parameter) = segments[index] else { continue }
            let bytes = path.segment(index)
            if parameter == .kind {
                guard let kind = ReactionKind(bytes: bytes) else {
                    return .failure(MalformedID(description: "\(parameter.what) \"\(String(decoding: bytes, as: UTF8.self))\""))
                }
                ids.kind = kind
                continue
            }
            guard let value = EntityID.parse(bytes: bytes) else {
                return .failure(MalformedID(description: "\(parameter.what) \"\(String(decoding: bytes, as: UTF8.self))\""))
            }
            switch parameter {
            case .post: ids.post = value
            case .user: ids.user = value
            case .kind: break
            }
        }
        return .success(ids)
    }

    /// Whether some path fits both patterns with neither more specific (a literal of one where
    /// the other has an id, both ways): then matching could not tell them apart.
    func isAmbiguous(with other: PathPattern) -> Bool {
        guard segments.count == other.segments.count else { return false }
        var mineOnly = false
        var theirsOnly = false
        for (mine, theirs) in zip(segments, other.segments) {
            switch (mine, theirs) {
            case (.literal(let a), .literal(let b)): if a != b { return false }
            case (.literal, .id): mineOnly = true
            case (.id, .literal): theirsOnly = true
            case (.id, .id): break
            }
        }
        return mineOnly == theirsOnly
    }

    /// What is wrong with the malformed path parameter `what` names (as `MalformedID` names it).
    static func reason(_ what: String) -> String {
        what.hasPrefix(Parameter.kind.what)
            ? "is not a reaction kind: a name of 1-32 characters of a-z, 0-9 and _" : "is not a positive 64-bit integer"
    }

    /// A path segment where an id goes that is not one, named as the answer names it.
    struct MalformedID: Error, Equatable, CustomStringConvertible {
        let description: String
    }
}

/// The ids in a request's path; 0 where the route has none (ids are positive).
struct PathIDs: Sendable, Equatable {
    var post: Int64 = 0
    var user: Int64 = 0
    /// The reaction's kind, on the reaction routes.
    var kind: ReactionKind? = nil
}
