import ShardRouter

/// An error reply from a Redis Cluster node that means "this did not run here", and where to go.
enum RedisRedirect: Equatable, Sendable {
    /// `MOVED <slot> <host:port>`: the slot lives there now; remember it and send there.
    case moved(HashSlot, RedisEndpoint)
    /// `ASK <slot> <host:port>`: the slot is being migrated there and this key is gone already;
    /// send there once, after `ASKING`, without changing the map.
    case ask(HashSlot, RedisEndpoint)
    /// `TRYAGAIN` (a request of several keys while their slot is being migrated) or `LOADING`
    /// (a node that is reading its data): back off and send again.
    case tryAgain
    /// `CLUSTERDOWN …`: the cluster cannot serve the slot; give up for now.
    case clusterDown

    /// The redirect an error reply's text asks for, or `nil` for any other error. An empty host
    /// (`MOVED 3999 :6380`) means the host that answered (`askedHost`).
    init?(errorText text: String, askedHost: String) {
        if text.hasPrefix("TRYAGAIN") || text.hasPrefix("LOADING") {
            self = .tryAgain
            return
        }
        if text.hasPrefix("CLUSTERDOWN") {
            self = .clusterDown
            return
        }
        let isMoved = text.hasPrefix("MOVED ")
        guard isMoved || text.hasPrefix("ASK ") else { return nil }
        let parts = text.split(separator: " ")
        guard parts.count == 3, let number = UInt16(parts[1]), let slot = HashSlot(rawValue: number) else { return nil }
        var address = parts[2]
        if address.hasPrefix(":") || address.hasPrefix("?:") { address = Substring(askedHost) + address.drop { $0 == "?" } }
        guard let endpoint = RedisEndpoint(address) else { return nil }
        self = isMoved ? .moved(slot, endpoint) : .ask(slot, endpoint)
    }

    init?(reply: RedisReply, askedHost: String) {
        guard case .error(let text) = reply else { return nil }
        self.init(errorText: text, askedHost: askedHost)
    }
}
