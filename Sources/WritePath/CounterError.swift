/// Why the write path could not answer an operation. The HTTP layer maps codes to statuses.
public struct CounterError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure this is. New kinds may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        /// The post does not exist in `posts` (HTTP 404).
        public static let unknownPost = Code(name: "unknown_post")
        /// An id is not a positive 64-bit integer (HTTP 400).
        public static let invalidArgument = Code(name: "invalid_argument")
        /// Too many changes wait for PostgreSQL; retry later (HTTP 503 with Retry-After).
        public static let backlogFull = Code(name: "backlog_full")
        /// Redis (or, for a post seen for the first time, PostgreSQL) is unreachable (HTTP 503).
        /// The operation may or may not have taken effect.
        public static let unavailable = Code(name: "unavailable")
        /// The node is shutting down (HTTP 503).
        public static let shuttingDown = Code(name: "shutting_down")
        /// Another node owns the post's slot, or nobody does now: nothing was done here. The API
        /// forwards the request to the owner; a request forwarded here by mistake is answered
        /// `421 not_owner` naming the owner, and one whose slot no live node owns `503 no_owner`.
        public static let notOwner = Code(name: "not_owner")
        /// The post's slot is changing owner and did not settle in time (HTTP 503 with
        /// Retry-After): nothing was done.
        public static let slotMoving = Code(name: "slot_moving")
        /// The shard already holds as many operations waiting to be decided as it may
        /// (`WritePathConfiguration.maximumQueuedOperationsPerShard`); retry later (HTTP 503 with
        /// Retry-After): nothing was done.
        public static let overloaded = Code(name: "overloaded")
        /// With `--ack replicated`: the change is written on its Redis master but not confirmed
        /// on enough replicas in time (HTTP 503 with Retry-After). It stands, and reaches
        /// PostgreSQL, unless that master fails before a replica has it: read the state before
        /// repeating a toggle.
        public static let notReplicated = Code(name: "not_replicated")
        /// The operation names a reaction kind the deployment's fixed kinds do not list (HTTP
        /// 400): nothing was done.
        public static let unknownKind = Code(name: "unknown_kind")
        /// A reaction of a kind new to the post would take it past the distinct kinds a post
        /// may hold in an open set (`--reaction-kinds-per-post`; HTTP 409): nothing was done.
        public static let tooManyKinds = Code(name: "too_many_kinds")
        public var description: String { name }
    }

    public let code: Code
    public let message: String
    /// For retryable errors: seconds after which a retry makes sense.
    public let retryAfterSeconds: Int?

    public init(code: Code, message: String, retryAfterSeconds: Int? = nil) {
        self.code = code
        self.message = message
        self.retryAfterSeconds = retryAfterSeconds
    }

    public var description: String { "\(code): \(message)" }

    /// This node does not own `slot` (any more): nothing was done.
    public static func notOwner(_ slot: UInt16) -> CounterError {
        CounterError(code: .notOwner, message: "this node does not own slot \(slot); nothing was done here")
    }

    static func unknownPost(_ postID: Int64) -> CounterError {
        CounterError(code: .unknownPost, message: "post \(postID) does not exist")
    }
}
