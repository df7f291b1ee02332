import Foundation

/// When a load-generator thread sends, whatever its wire (`EventLoop`, `HTTP2EventLoop`): in
/// closed loop, whenever a client is idle; in open loop, on a timetable of its share of the
/// rate, whether or not answers came back (latency then counts from the scheduled time, so
/// queueing is measured).
struct SendSchedule {
    private let interval: Duration?
    private var nextDue = ContinuousClock.now
    /// Open loop: sends that are due and found no idle client yet, oldest first.
    private var backlog: [ContinuousClock.Instant] = []

    /// `rateShare`: this thread's sends per second, `nil` for closed loop.
    init(rateShare: Double?) {
        interval = rateShare.map { .nanoseconds(Int64(1e9 / max($0, 0.001))) }
    }

    /// Sends what is due by `now`: `idleClient` hands out an idle client (`nil` when there is
    /// none), `send` sends on it for the time it was due. A send that found no client for longer
    /// than `timeout` (every client busy, or the server unreachable) has failed: it goes to
    /// `dropped` unsent, so it touches no pair, rather than being sent late and timed out at once,
    /// again and again.
    mutating func sendDue(
        now: ContinuousClock.Instant, timeout: Duration, idleClient: () -> Int?,
        send: (Int, ContinuousClock.Instant) -> Void, dropped: (ContinuousClock.Instant) -> Void
    ) {
        guard let interval else {
            while let client = idleClient() { send(client, now) }
            return
        }
        while nextDue <= now {
            backlog.append(nextDue)
            nextDue += interval
        }
        var overdue = 0
        while overdue < backlog.count, now - backlog[overdue] > timeout {
            dropped(backlog[overdue])
            overdue += 1
        }
        var taken = overdue
        while taken < backlog.count, let client = idleClient() {
            send(client, backlog[taken])
            taken += 1
        }
        backlog.removeFirst(taken)
    }

    /// How long the thread may wait for socket events: in open loop until the next send is
    /// due, otherwise 50 ms (answers wake it). A wait shorter than epoll's millisecond is rounded
    /// up, not down to 0: that would spin a core and steal it from the server being measured. A
    /// send is then at most 1 ms late, and its latency still counts from its scheduled time.
    func waitMilliseconds(now: ContinuousClock.Instant) -> Int32 {
        guard interval != nil, backlog.isEmpty else { return 50 }
        let untilDue = nextDue - now
        let nanoseconds = untilDue.components.seconds * 1_000_000_000 + untilDue.components.attoseconds / 1_000_000_000
        return Int32(max(0, min(50, (nanoseconds + 999_999) / 1_000_000)))
    }

    /// Microseconds from `start` to `now`, for the latency histogram.
    static func microseconds(from start: ContinuousClock.Instant, to now: ContinuousClock.Instant) -> UInt64 {
        let latency = now - start
        return UInt64(max(0, latency.components.seconds * 1_000_000 + latency.components.attoseconds / 1_000_000_000_000))
    }
}

/// The sockets of the load generator's threads: non-blocking TCP to an endpoint.
enum LoadSocket {
    /// A non-blocking, close-on-exec socket with `TCP_NODELAY`, connecting to `endpoint` in the
    /// background (`connecting`: wait for writability); `nil` when no socket could be made (out
    /// of descriptors, say). Close-on-exec: a process the bench starts meanwhile (the chaos run
    /// restarts the node) must not inherit it — it would keep it open after the bench closes it,
    /// and its events would keep arriving under the slot's token.
    static func connect(to endpoint: Endpoint) -> (descriptor: Int32, connecting: Bool)? {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        var one: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(endpoint.port).bigEndian)
        inet_pton(AF_INET, endpoint.host, &address.sin_addr)
        let result = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        return (descriptor, result != 0)
    }

    /// Closes `descriptor` with a reset, not a FIN: a failing node makes the generator reconnect
    /// hundreds of times a second, and each graceful close would hold a local port in TIME_WAIT
    /// for a minute — enough of them and no connection can be made at all.
    static func abandon(_ descriptor: Int32) {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        close(descriptor)
    }
}
