/// A failure talking to Redis: what kind it was and a message that keeps Redis's own text
/// (prefixed `(Redis)`) when the server said no.
public struct RedisError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. New kinds may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// Redis could not be reached; calls fail at once until the next reconnect attempt.
        public static let connectionFailed = Code(name: "connectionFailed")
        /// The connection broke or timed out during a call; its commands may or may not have run.
        public static let connectionLost = Code(name: "connectionLost")
        /// Redis answered with an error reply (`-ERR …`, `-WRONGTYPE …`, `-EXECABORT …`).
        public static let server = Code(name: "server")
        /// The caller passed something the client refuses before sending it.
        public static let invalidArgument = Code(name: "invalidArgument")
        /// A reply did not have the shape the command promises.
        public static let unexpectedReply = Code(name: "unexpectedReply")
        /// Redis Cluster cannot serve the slot now — no master for it, `CLUSTERDOWN`, a slot
        /// migration that did not settle, too many redirects — and the commands did not run.
        public static let clusterUnavailable = Code(name: "clusterUnavailable")
        /// The seed nodes do not describe a usable cluster: not a cluster node, slots that no
        /// master serves, no seed reachable at start. A configuration problem.
        public static let clusterConfiguration = Code(name: "clusterConfiguration")
        /// Redis refused a fenced write (`SlotFence`): the writer no longer holds the slot's
        /// epoch, or the slot has none. Nothing of the group ran.
        public static let fenced = Code(name: "fenced")
        public var description: String { name }
    }

    /// What kind of failure this is.
    public let code: Code
    /// What happened; for `.server`, Redis's reply text after `(Redis) `.
    public let message: String

    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    /// An error reply from the server, keeping its text.
    static func server(_ text: String) -> RedisError {
        RedisError(code: .server, message: "(Redis) \(text)")
    }

    /// Whether the same call can succeed later: connection failures, and the server's
    /// `LOADING`, `BUSY`, `TRYAGAIN`, `MASTERDOWN` and `CLUSTERDOWN` replies.
    public var isRetryable: Bool {
        switch code {
        case .connectionFailed, .connectionLost, .clusterUnavailable: return true
        case .server:
            let text = message.dropFirst("(Redis) ".count)
            return ["LOADING", "BUSY", "TRYAGAIN", "MASTERDOWN", "CLUSTERDOWN"].contains { text.hasPrefix($0) }
        default: return false
        }
    }

    /// Whether Redis said it is still loading its data into memory (`LOADING`, after a restart
    /// while it reads its AOF or RDB file): the same call will succeed once it has.
    public var isLoading: Bool { message.contains("LOADING") }

    public var description: String { "Redis \(code): \(message)" }
}
