import CounterWire
import Synchronization

/// The bench's scenarios as workloads. Writes always carry their pair; every pair belongs to one
/// connection (users are drawn from the connection's own range), so at most one request per pair
/// is in flight.
public enum Scenario: String, CaseIterable, Sendable {
    /// Every connection on one post, a new user for every request.
    case hot
    /// Posts drawn by Zipf (a few posts get most requests); users from the connection's range.
    case zipf
    /// A few users per connection toggling a few posts as fast as they can.
    case storm
    /// Feed pages: queries of 20–100 post ids drawn by Zipf.
    case feed
    /// Reads and writes in a ratio, posts drawn by Zipf.
    case mixed
    /// List pages: a post's likers (posts by Zipf) and, every other request, a user's likes
    /// (the connection's own users), first pages.
    case lists
    /// Every connection on one post, reactions of random kinds (`reactionKinds`): a new user
    /// for every request, as `hot`; or, with `reactionUsersPerConnection`, a few users of each
    /// connection's own, so that users keep changing kinds — with one kind per user, a storm of
    /// switches.
    case reactions

    public var writes: Bool { self != .feed && self != .lists }
}

/// Write operations the scenarios send.
public enum WriteOperation: String, CaseIterable, Sendable {
    case toggle, like, unlike
}

/// Builds the HTTP requests of a scenario against a node.
public struct ScenarioWorkload: Workload {
    public let scenario: Scenario
    public let operation: WriteOperation
    public let posts: [Int64]
    public let zipf: ZipfDistribution
    /// Share of reads in `mixed` (0…1).
    public let readRatio: Double
    public let token: String?
    /// Users are `userBase + connection * usersPerConnection + k`.
    public let userBase: Int64
    public let usersPerConnection: Int64
    /// Which endpoint each request goes to.
    public var routing = Routing.first
    /// Posts per `feed` page (`nil`: 20 to 100 at random).
    public var feedSize: Int?
    /// End users' tokens, one per connection (connection `i` uses `userTokens[i % count]`, for
    /// the user `userBase + i * usersPerConnection + 1`): writes then go to the user routes
    /// (`/v1/posts/{post}/like…`) as that user, instead of naming users with the API token.
    public var userTokens: [String]?
    /// Writes go to the seed's route, `POST /api/posts/{post}/like` (the seed's Laravel
    /// endpoint, or a node with `--seed-route true`), each with a token this signs for the
    /// request's own user; the route only toggles.
    public var seedRouteToken: (@Sendable (Int64) -> String)?
    /// `storm` with users every connection shares (`userBase + 1 … + n`), so the same pairs are
    /// toggled by several connections at once; such a run is checked by parity
    /// (`CorrectnessCheck.runByParity`).
    public var sharedStormUsers: Int64?
    /// `reactions`: the kinds drawn (the node must list them all, `--reactions`).
    public var reactionKinds = ["like", "love", "haha", "wow", "sad", "angry"]
    /// `reactions`: each connection's users, in turn; `nil`: a new user for every request.
    public var reactionUsersPerConnection: Int64?

    /// The user connection `connection` writes as with `userTokens`.
    public func tokenUser(ofConnection connection: Int) -> Int64 {
        userBase + Int64(connection) * usersPerConnection + 1
    }

    /// Where a scenario's requests go among `LoadOptions.endpoints`.
    public enum Routing: Sendable {
        /// All to the first endpoint.
        case first
        /// Connection `i` to endpoint `i mod count`, whatever the post: a round-robin load
        /// balancer in front of a cluster (a node forwards what it does not own).
        case spread(count: Int)
        /// Each post's requests to its slot's owner; feed queries, which span owners, to the
        /// nodes in turn by connection.
        case slotAware(SlotAwareRoutes)

        func endpoint(post: Int64?, connection: Int) -> Int {
            switch self {
            case .first: return 0
            case .spread(let count): return connection % max(1, count)
            case .slotAware(let routes):
                guard let post else { return connection % routes.endpoints.count }
                return routes.endpoint(ofPost: post)
            }
        }
    }

    public init(
        scenario: Scenario, operation: WriteOperation, posts: [Int64], zipfExponent: Double, readRatio: Double,
        token: String?, userBase: Int64, usersPerConnection: Int64 = 1_000_000
    ) {
        self.scenario = scenario
        self.operation = operation
        self.posts = posts
        self.zipf = ZipfDistribution(count: posts.count, exponent: zipfExponent)
        self.readRatio = readRatio
        self.token = token
        self.userBase = userBase
        self.usersPerConnection = usersPerConnection
    }

    public func request(connection: Int, sequence: Int, random: inout SystemRandomNumberGenerator) -> PlannedRequest {
        let firstUser = userBase + Int64(connection) * usersPerConnection + 1
        switch scenario {
        case .hot:
            return write(post: posts[0], user: firstUser + Int64(sequence) % usersPerConnection, connection: connection)
        case .zipf:
            return write(
                post: posts[zipf.sample(using: &random)], user: firstUser + Int64.random(in: 0..<min(usersPerConnection, 1_000), using: &random),
                connection: connection)
        case .storm:
            let post = posts[Int.random(in: 0..<min(posts.count, 4), using: &random)]
            if let sharedStormUsers {
                return write(post: post, user: userBase + 1 + Int64.random(in: 0..<max(1, sharedStormUsers), using: &random), connection: connection)
            }
            return write(post: post, user: firstUser + Int64.random(in: 0..<3, using: &random), connection: connection)
        case .feed:
            let size = feedSize ?? Int.random(in: 20...100, using: &random)
            var ids: [Int64] = []
            ids.reserveCapacity(size)
            for _ in 0..<size { ids.append(posts[zipf.sample(using: &random)]) }
            return PlannedRequest(
                bytes: Self.http("POST", "/v1/posts/query", token: token, body: Self.feedBody(ids, user: firstUser)),
                endpoint: routing.endpoint(post: nil, connection: connection))
        case .lists:
            if sequence % 2 == 0 {
                let post = posts[zipf.sample(using: &random)]
                return PlannedRequest(
                    bytes: Self.http("GET", "/v1/posts/\(post)/likers?limit=20", token: token, body: nil),
                    endpoint: routing.endpoint(post: post, connection: connection))
            }
            let user = firstUser + Int64.random(in: 0..<min(usersPerConnection, 1_000), using: &random)
            return PlannedRequest(
                bytes: Self.http("GET", "/v1/users/\(user)/likes?limit=20", token: token, body: nil),
                endpoint: routing.endpoint(post: nil, connection: connection))
        case .reactions:
            let user = firstUser + Int64(sequence) % max(1, min(reactionUsersPerConnection ?? usersPerConnection, usersPerConnection))
            let kind = reactionKinds[Int.random(in: 0..<reactionKinds.count, using: &random)]
            return react(post: posts[0], user: user, kind: kind, connection: connection)
        case .mixed:
            let post = posts[zipf.sample(using: &random)]
            let user = firstUser + Int64.random(in: 0..<min(usersPerConnection, 1_000), using: &random)
            if Double.random(in: 0..<1, using: &random) < readRatio {
                return PlannedRequest(
                    bytes: Self.http("GET", "/v1/posts/\(post)/likes/\(user)", token: token, body: nil),
                    endpoint: routing.endpoint(post: post, connection: connection))
            }
            return write(post: post, user: user, connection: connection)
        }
    }

    private func write(post: Int64, user: Int64, connection: Int) -> PlannedRequest {
        let bytes: [UInt8]
        if let seedRouteToken {
            bytes = Self.http("POST", "/api/posts/\(post)/like", token: seedRouteToken(user), body: nil)
            return PlannedRequest(
                bytes: bytes, pair: CorrectnessCheck.Pair(user: user, post: post), endpoint: routing.endpoint(post: post, connection: connection))
        }
        if let userTokens, !userTokens.isEmpty {
            let token = userTokens[connection % userTokens.count]
            switch operation {
            case .toggle: bytes = Self.http("POST", "/v1/posts/\(post)/like/toggle", token: token, body: nil)
            case .like: bytes = Self.http("PUT", "/v1/posts/\(post)/like", token: token, body: nil)
            case .unlike: bytes = Self.http("DELETE", "/v1/posts/\(post)/like", token: token, body: nil)
            }
            let user = tokenUser(ofConnection: connection)
            return PlannedRequest(
                bytes: bytes, pair: CorrectnessCheck.Pair(user: user, post: post), endpoint: routing.endpoint(post: post, connection: connection))
        }
        switch operation {
        case .toggle: bytes = Self.http("POST", "/v1/posts/\(post)/likes/\(user)/toggle", token: token, body: nil)
        case .like: bytes = Self.http("PUT", "/v1/posts/\(post)/likes/\(user)", token: token, body: nil)
        case .unlike: bytes = Self.http("DELETE", "/v1/posts/\(post)/likes/\(user)", token: token, body: nil)
        }
        return PlannedRequest(
            bytes: bytes, pair: CorrectnessCheck.Pair(user: user, post: post), endpoint: routing.endpoint(post: post, connection: connection))
    }

    private func react(post: Int64, user: Int64, kind: String, connection: Int) -> PlannedRequest {
        let bytes: [UInt8]
        var pairUser = user
        if let userTokens, !userTokens.isEmpty {
            let token = userTokens[connection % userTokens.count]
            pairUser = tokenUser(ofConnection: connection)
            switch operation {
            case .toggle: bytes = Self.http("POST", "/v1/posts/\(post)/reactions/\(kind)/toggle", token: token, body: nil)
            case .like: bytes = Self.http("PUT", "/v1/posts/\(post)/reactions/\(kind)", token: token, body: nil)
            case .unlike: bytes = Self.http("DELETE", "/v1/posts/\(post)/reactions/\(kind)", token: token, body: nil)
            }
        } else {
            let path = "/v1/posts/\(post)/reactions/\(kind)/users/\(user)"
            switch operation {
            case .toggle: bytes = Self.http("POST", path + "/toggle", token: token, body: nil)
            case .like: bytes = Self.http("PUT", path, token: token, body: nil)
            case .unlike: bytes = Self.http("DELETE", path, token: token, body: nil)
            }
        }
        return PlannedRequest(
            bytes: bytes, pair: CorrectnessCheck.Pair(user: pairUser, post: post), endpoint: routing.endpoint(post: post, connection: connection))
    }

    /// A `FeedQuery` body, written with `JSONWriter` (the load generator shares the machine
    /// with the node, so its own cost matters); a test holds it to `WireEncoder`'s bytes.
    static func feedBody(_ postIDs: [Int64], user: Int64) -> String {
        var writer = JSONWriter(capacity: 20 * postIDs.count + 32)
        writer.objectStart()
        writer.key("post_ids")
        writer.arrayStart()
        for id in postIDs { writer.value(id) }
        writer.arrayEnd()
        writer.field("user_id", user)
        writer.objectEnd()
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    static func http(_ method: String, _ path: String, token: String?, body: String?) -> [UInt8] {
        var text = "\(method) \(path) HTTP/1.1\r\nHost: bench\r\n"
        if let token { text += "Authorization: Bearer \(token)\r\n" }
        if let body { text += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n" }
        text += "\r\n"
        if let body { text += body }
        return Array(text.utf8)
    }
}

/// GET of one path on every request: the HTTP ceiling (`/healthz`) or any URL.
public struct FixedPathWorkload: Workload {
    let bytes: [UInt8]

    public init(path: String, token: String? = nil) {
        bytes = ScenarioWorkload.http("GET", path, token: token, body: nil)
    }

    public func request(connection: Int, sequence: Int, random: inout SystemRandomNumberGenerator) -> PlannedRequest {
        PlannedRequest(bytes: bytes)
    }
}

/// Likes that spread evenly over many posts, each pair once: the `i`-th request sent (counted
/// over all connections and runs of the workload) likes post `firstPost + i % posts` for user
/// `userBase + i / posts`, so the first `posts` requests give every post its first liker, the
/// next `posts` its second, and so on. Likes are idempotent: a request that failed can be sent
/// again without counting twice.
public final class SpreadLikesWorkload: Workload {
    public let firstPost: Int64
    public let posts: Int64
    public let userBase: Int64
    let token: String?
    private let next = Atomic<Int64>(0)

    public init(firstPost: Int64, posts: Int64, userBase: Int64, token: String?) {
        self.firstPost = firstPost
        self.posts = posts
        self.userBase = userBase
        self.token = token
    }

    /// Requests handed out so far.
    public var sent: Int64 { next.load(ordering: .relaxed) }

    /// The pair of request `index`.
    public func pair(_ index: Int64) -> CorrectnessCheck.Pair {
        CorrectnessCheck.Pair(user: userBase + index / posts, post: firstPost + index % posts)
    }

    public func request(connection: Int, sequence: Int, random: inout SystemRandomNumberGenerator) -> PlannedRequest {
        let pair = pair(next.add(1, ordering: .relaxed).oldValue)
        return PlannedRequest(bytes: ScenarioWorkload.http("PUT", "/v1/posts/\(pair.post)/likes/\(pair.user)", token: token, body: nil))
    }
}
