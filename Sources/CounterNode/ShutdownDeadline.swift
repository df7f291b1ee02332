import CounterCore
import Foundation
import Synchronization
import WritePath

/// Bounds a shutdown. Started at the first signal; if the shutdown has not ended `timeout`
/// later, it logs what is left in the write-behind logs (`shutdown_timeout`) and makes the write
/// path stop draining, so the shutdown ends with what waits left in Redis, durable there, for the
/// next start to flush. Should even that not end it within `grace` (a PostgreSQL that hangs
/// instead of failing), it logs again and exits the process with status 0.
final class ShutdownDeadline: Sendable {
    private let timeout: Duration?
    private let grace: Duration
    private let service: CounterService
    private let log: NodeLog
    private let expired = Atomic<Bool>(false)

    /// - Parameter timeout: `nil`: no limit.
    init(timeout: Duration?, grace: Duration = .seconds(5), service: CounterService, log: NodeLog) {
        self.timeout = timeout
        self.grace = grace
        self.service = service
        self.log = log
    }

    /// Whether the timeout passed before the shutdown ended.
    var hasExpired: Bool { expired.load(ordering: .acquiring) }

    /// Runs the clock from the first signal until the shutdown ends (the caller cancels it).
    func run() async {
        guard let timeout else { return }
        do { try await Task.sleep(for: timeout) } catch { return }
        expired.store(true, ordering: .releasing)
        let left = Self.summary(await service.pendingBySlot())
        log.log(
            .warn, "shutdown_timeout",
            [
                "timeout_s": String(Int(timeout.inSeconds)), "left_changes": left.changes,
                "left_slots": left.slotCount, "slots": left.slots,
                "action": "stopping without flushing the rest; the next start flushes it",
            ])
        await service.abandonDrain()
        do { try await Task.sleep(for: grace) } catch { return }
        log.log(
            .warn, "exiting_now",
            [
                "reason": "the shutdown did not end \(Int(grace.inSeconds)) s after its timeout",
                "left_changes": left.changes, "left_slots": left.slotCount,
            ])
        exit(0)
    }

    /// What `pending` (changes per slot) amounts to, for the log: the changes counted (with a
    /// `+` when some slots' logs must be read again to know), how many slots, and the first 64
    /// slot numbers (each slot's log is one Redis stream).
    static func summary(_ pending: [UInt16: Int]) -> (changes: String, slotCount: String, slots: String) {
        let changes = pending.values.reduce(0, +)
        let unknown = pending.values.contains(0)
        let slots = pending.keys.sorted()
        var list = slots.prefix(64).map(String.init).joined(separator: ",")
        if slots.count > 64 { list += ",…" }
        return ("\(changes)\(unknown ? "+" : "")", String(slots.count), list.isEmpty ? "-" : list)
    }
}
