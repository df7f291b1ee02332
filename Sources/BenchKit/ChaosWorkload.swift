/// The chaos run's load: likes, unlikes and toggles on pairs each connection owns (so the last
/// acknowledged state of every pair is known), reads of those pairs, and feed queries. The
/// first user of each connection is a poison user: the fault schedule adds a trigger that
/// refuses those users' rows for a while (every connection has one, as the open-loop generator
/// may leave some connections idle for long).
///
/// With `reactionKinds`, the writes are reactions of random kinds (`like` among them) through the
/// reaction routes, and the reads are the post's summary with the user's kinds.
public struct ChaosWorkload: Workload {
    public let posts: [Int64]
    public let zipf: ZipfDistribution
    public let token: String?
    /// Users are `userBase + connection * usersPerConnection + k`, `k` in 1…`usersPerConnection`.
    public let userBase: Int64
    public let usersPerConnection: Int64
    /// The kinds a reaction run draws from (the node lists them all); `nil`: likes only.
    public var reactionKinds: [String]?

    /// Whether the poison trigger refuses `user`: the first user of a connection.
    public func isPoison(_ user: Int64) -> Bool {
        user > userBase && (user - userBase - 1) % usersPerConnection == 0
    }

    /// The same rule in SQL, for the trigger: `user` names the user.
    public func poisonCondition(_ user: String) -> String {
        "(\(user) > \(userBase) AND (\(user) - \(userBase) - 1) % \(usersPerConnection) = 0)"
    }

    public init(posts: [Int64], token: String?, userBase: Int64, usersPerConnection: Int64 = 50) {
        self.posts = posts
        self.zipf = ZipfDistribution(count: posts.count, exponent: 0.99)
        self.token = token
        self.userBase = userBase
        self.usersPerConnection = usersPerConnection
    }

    public func request(connection: Int, sequence: Int, random: inout SystemRandomNumberGenerator) -> PlannedRequest {
        let firstUser = userBase + Int64(connection) * usersPerConnection + 1
        // A fifth of the writes are the connection's poison user's, so the poison trigger meets
        // changes whenever it is in place.
        let user =
            Int.random(in: 0..<5, using: &random) == 0
            ? firstUser
            : firstUser + Int64.random(in: 0..<usersPerConnection, using: &random)
        let post = posts[zipf.sample(using: &random)]
        let roll = Int.random(in: 0..<100, using: &random)
        if let kinds = reactionKinds, roll < 80 {
            return reaction(roll, kind: kinds[Int.random(in: 0..<kinds.count, using: &random)], post: post, user: user)
        }
        switch roll {
        case 0..<25:
            return PlannedRequest(
                bytes: ScenarioWorkload.http("POST", "/v1/posts/\(post)/likes/\(user)/toggle", token: token, body: nil),
                pair: CorrectnessCheck.Pair(user: user, post: post))
        case 25..<45:
            return PlannedRequest(
                bytes: ScenarioWorkload.http("PUT", "/v1/posts/\(post)/likes/\(user)", token: token, body: nil),
                pair: CorrectnessCheck.Pair(user: user, post: post))
        case 45..<60:
            return PlannedRequest(
                bytes: ScenarioWorkload.http("DELETE", "/v1/posts/\(post)/likes/\(user)", token: token, body: nil),
                pair: CorrectnessCheck.Pair(user: user, post: post))
        case 60..<80:
            // A read changes nothing, so it does not touch what is expected of the pair (a read
            // that fails during a fault must not make an acknowledged state unknown).
            return PlannedRequest(bytes: ScenarioWorkload.http("GET", "/v1/posts/\(post)/likes/\(user)", token: token, body: nil))
        default:
            var ids: [Int64] = []
            for _ in 0..<20 { ids.append(posts[zipf.sample(using: &random)]) }
            return PlannedRequest(
                bytes: ScenarioWorkload.http(
                    "POST", "/v1/posts/query", token: token,
                    body: ScenarioWorkload.feedBody(ids, user: firstUser)))
        }
    }

    /// A reaction run's request of `roll` (below 80): toggle, add or remove `kind`, or read the
    /// post's summary with the user's kinds (which changes nothing of what is expected).
    private func reaction(_ roll: Int, kind: String, post: Int64, user: Int64) -> PlannedRequest {
        let path = "/v1/posts/\(post)/reactions/\(kind)/users/\(user)"
        let pair = CorrectnessCheck.Pair(user: user, post: post)
        switch roll {
        case 0..<25: return PlannedRequest(bytes: ScenarioWorkload.http("POST", path + "/toggle", token: token, body: nil), pair: pair)
        case 25..<45: return PlannedRequest(bytes: ScenarioWorkload.http("PUT", path, token: token, body: nil), pair: pair)
        case 45..<60: return PlannedRequest(bytes: ScenarioWorkload.http("DELETE", path, token: token, body: nil), pair: pair)
        default: return PlannedRequest(bytes: ScenarioWorkload.http("GET", "/v1/posts/\(post)/reactions?user=\(user)", token: token, body: nil))
        }
    }
}
