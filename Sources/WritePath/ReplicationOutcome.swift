/// How a batch's `WAIT` for replicas ended (`--ack replicated`).
public struct ReplicationOutcome: Sendable, Equatable {
    /// Every master the batch wrote to had its writes on enough replicas.
    public let confirmed: Bool
    /// What each master answered, for the log (`127.0.0.1:45001: 0 of 1 replicas`).
    public let detail: String

    public init(confirmed: Bool, detail: String) {
        self.confirmed = confirmed
        self.detail = detail
    }
}
