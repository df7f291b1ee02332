import CounterCore
import ShardRouter
import Synchronization

/// Which slots this node decides for, and under which epoch, as the rest of the node reads it:
/// a copy the shards publish after every move of one of their slots (`Shard.run`). Only the
/// shards move slots (`SlotLifecycle`, in each shard's `ShardStateMachine`); the membership,
/// the API and the metrics read this view and never change it.
///
/// A node that is the only writer (tests, benches, an embedded write path) uses `soleWriter`:
/// every slot is served and nothing is fenced. A node of a cluster starts with no slot and
/// serves only what it won in PostgreSQL; its writes for a slot carry the slot's epoch, which
/// Redis and PostgreSQL check (`SlotFence`, `SlotTable.staleSlots`).
public final class OwnedSlots: Sendable {
    /// One slot, as this node sees it.
    public enum State: Sendable, Equatable {
        /// Another node owns it, or nobody does: not decided here.
        case notOwned
        /// Won under `epoch`; its log is being drained before it is served: operations wait.
        case acquiring(epoch: Int64)
        /// Served under `epoch`.
        case serving(epoch: Int64)
        /// Being handed to another node: new operations wait while the batch in flight is
        /// written (under `epoch`) and flushed.
        case releasing(epoch: Int64)

        /// The epoch held, unless not owned.
        public var epoch: Int64? {
            switch self {
            case .notOwned: return nil
            case .acquiring(let epoch), .serving(let epoch), .releasing(let epoch): return epoch
            }
        }
    }

    /// Whether writes carry epochs (`false` for a sole writer).
    public let isFenced: Bool
    private let states: Mutex<[State]>
    private let fencedCount = Atomic<Int>(0)
    /// Who waits for a slot to move (`watch()`), each on an alarm of its own.
    private let watchers = Mutex<[ObjectIdentifier: LoopAlarm]>([:])

    /// Writes refused because this node no longer held the slot's epoch: by Redis, by
    /// PostgreSQL's check in the flush, or before sending (the slot was given up meanwhile).
    public var fencedWrites: Int { fencedCount.load(ordering: .relaxed) }

    /// Counts refused writes (`fencedWrites`): a metric, not a decision.
    func noteFenced(_ count: Int = 1) {
        fencedCount.add(count, ordering: .relaxed)
    }

    /// A node of a cluster: no slot owned until the membership gives it some.
    public init() {
        isFenced = true
        states = Mutex(Array(repeating: .notOwned, count: HashSlot.count))
    }

    private init(soleWriter: Void) {
        isFenced = false
        states = Mutex(Array(repeating: .serving(epoch: 0), count: HashSlot.count))
    }

    /// Every slot served, no write fenced: for a write path that is, by its caller's word, the
    /// only writer of its Redis keys and PostgreSQL rows.
    public static func soleWriter() -> OwnedSlots {
        OwnedSlots(soleWriter: ())
    }

    /// What `slot` is now.
    public func state(of slot: UInt16) -> State {
        if !isFenced { return .serving(epoch: 0) }
        return states.withLock { $0[Int(slot)] }
    }

    /// Every slot's state, by slot number.
    public func snapshot() -> [State] {
        states.withLock { $0 }
    }

    /// Publishes `slot`'s state: called by the shard that owns the slot, after it moved (a sole
    /// writer's slots are always served as far as the rest of the node knows, but their moves —
    /// a repair — still wake the watches).
    func publish(_ slot: UInt16, _ state: State) {
        if isFenced { states.withLock { $0[Int(slot)] = state } }
        let waiting = watchers.withLock { $0.isEmpty ? [] : Array($0.values) }
        for alarm in waiting { alarm.ring() }
    }

    /// A watch of the slots' moves, begun now: `waitForMove(until:)` returns once a slot has
    /// moved since (at once if one has), or at the deadline. Begin it before asking whatever
    /// may answer "the slot is moving", so that a move in between is not missed.
    func watch() -> SlotWatch {
        let alarm = LoopAlarm()
        watchers.withLock { $0[ObjectIdentifier(alarm)] = alarm }
        return SlotWatch(alarm: alarm, slots: self)
    }

    fileprivate func endWatch(_ alarm: LoopAlarm) {
        watchers.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(alarm)) }
    }
}

/// A watch of a node's slot moves (`OwnedSlots.watch()`); `end()` it when done.
struct SlotWatch: Sendable {
    fileprivate let alarm: LoopAlarm
    fileprivate let slots: OwnedSlots

    /// Returns once a slot has moved since the watch began (or since the last return), or at
    /// `deadline`.
    func waitForMove(until deadline: ContinuousClock.Instant) async {
        await alarm.sleep(until: deadline)
    }

    func end() {
        slots.endWatch(alarm)
    }
}
