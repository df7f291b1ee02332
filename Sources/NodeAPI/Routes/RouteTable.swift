/// Routes by path: a path is split at `/` once, and its route is the most specific of those with
/// as many segments whose literals it has (a literal wins over an id). Works on the path's bytes,
/// as sent (nothing percent-decoded): it runs once per request.
struct RouteTable: Sendable {
    /// Every route, as declared.
    let routes: [Route]
    /// The routes by their number of segments, the most literal first (then as declared).
    private let bySegmentCount: [[Route]]

    /// - Precondition: no two routes share a path, or could both fit one path with neither more
    ///   specific; none has more than `PathSegments.capacity - 1` segments.
    init(_ routes: [Route]) {
        for (index, route) in routes.enumerated() {
            for other in routes[..<index] {
                precondition(!route.pattern.isAmbiguous(with: other.pattern), "routes \(other.label) and \(route.label) fit the same paths")
            }
        }
        precondition(routes.allSatisfy { $0.pattern.segments.count < PathSegments.capacity }, "a route has too many segments")
        self.routes = routes
        let longest = routes.map(\.pattern.segments.count).max() ?? 0
        var bySegmentCount = [[Route]](repeating: [], count: longest + 1)
        for route in routes { bySegmentCount[route.pattern.segments.count].append(route) }
        // A stable sort: the declared order stays among routes as literal as each other.
        self.bySegmentCount = bySegmentCount.map { routes in
            routes.enumerated().sorted { ($0.element.pattern.literalCount, -$0.offset) > ($1.element.pattern.literalCount, -$1.offset) }
                .map(\.element)
        }
    }

    /// The route `path` names, with the ids in it.
    func match(_ path: String) -> RouteMatch {
        if let match = path.utf8.withContiguousStorageIfAvailable(match(bytes:)) { return match }
        return Array(path.utf8).withUnsafeBufferPointer(match(bytes:))
    }

    private func match(bytes: UnsafeBufferPointer<UInt8>) -> RouteMatch {
        guard bytes.first == UInt8(ascii: "/") else { return .notFound }
        let path = PathSegments(bytes)
        // A path of more segments than the longest route fits none.
        guard path.count < bySegmentCount.count else { return .notFound }
        for route in bySegmentCount[path.count] where route.pattern.literalsMatch(path) {
            switch route.pattern.ids(path) {
            case .success(let ids): return .found(route, ids)
            case .failure(let malformed): return .invalidID(malformed.description)
            }
        }
        return .notFound
    }

    /// The route declared with `path` (`/v1/posts/{post}`), if any.
    func route(_ path: String) -> Route? {
        routes.first { $0.label == path }
    }
}

/// What a path names.
enum RouteMatch: Sendable, Equatable {
    case found(Route, PathIDs)
    /// The path has a route's shape but an id in it is not a positive 64-bit integer: `post id "x"`.
    case invalidID(String)
    case notFound

    /// The label metrics count the request under.
    var label: String {
        switch self {
        case .found(let route, _): return route.label
        case .invalidID: return "invalid"
        case .notFound: return "unknown"
        }
    }

    static func == (lhs: RouteMatch, rhs: RouteMatch) -> Bool {
        switch (lhs, rhs) {
        case (.found(let a, let x), .found(let b, let y)): return a === b && x == y
        case (.invalidID(let a), .invalidID(let b)): return a == b
        case (.notFound, .notFound): return true
        default: return false
        }
    }
}
