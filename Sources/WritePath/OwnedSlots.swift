import ShardRouter
import Synchronization

/// Which slots this node decides for, and under which epoch — the write path's view of slot
/// ownership, kept by whoever runs the cluster membership (`ClusterMember`) and read on every
/// operation and every Redis write.
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

    /// What an operation on a slot does now.
    public enum Admission: Sendable, Equatable {
        /// Decide it here.
        case serve
        /// The slot is changing owner: wait (briefly) and ask again.
        case wait
        /// Another node decides it.
        case elsewhere
    }

    /// Whether writes carry epochs (`false` for a sole writer).
    public let isFenced: Bool
    private let states: Mutex<[State]>
    private let fencedCount = Atomic<Int>(0)

    /// Writes refused because this node no longer held the slot's epoch: by Redis, by
    /// PostgreSQL's check in the flush, or before sending (the slot was given up meanwhile).
    public var fencedWrites: Int { fencedCount.load(ordering: .relaxed) }

    /// Counts refused writes (`fencedWrites`).
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

    /// What an operation on `slot` does now.
    public func admission(_ slot: UInt16) -> Admission {
        if !isFenced { return .serve }
        switch states.withLock({ $0[Int(slot)] }) {
        case .serving: return .serve
        case .acquiring, .releasing: return .wait
        case .notOwned: return .elsewhere
        }
    }

    /// The epoch a write for `slot` carries, or `nil` when this node may not write it: served,
    /// or being released (the batch in flight still writes). For a sole writer, `0` (unfenced).
    public func writeEpoch(_ slot: UInt16) -> Int64? {
        if !isFenced { return 0 }
        switch states.withLock({ $0[Int(slot)] }) {
        case .serving(let epoch), .releasing(let epoch): return epoch
        case .acquiring, .notOwned: return nil
        }
    }

    /// The epoch the flusher applies `slot`'s log under, or `nil` when this node may not: held
    /// in any way, including while it is being acquired (the drain before serving is a flush).
    public func flushEpoch(_ slot: UInt16) -> Int64? {
        if !isFenced { return 0 }
        return states.withLock { $0[Int(slot)] }.epoch
    }

    /// Sets the state of each slot of `slots`.
    public func set(_ slots: some Sequence<UInt16>, to state: (UInt16) -> State) {
        states.withLock { states in
            for slot in slots { states[Int(slot)] = state(slot) }
        }
    }

    /// Changes each slot of `slots` from its current state to `transform`'s result, atomically
    /// per call.
    public func update(_ slots: some Sequence<UInt16>, _ transform: (UInt16, State) -> State) {
        states.withLock { states in
            for slot in slots { states[Int(slot)] = transform(slot, states[Int(slot)]) }
        }
    }

    /// Gives `slot` up if it is still held under `epoch` (Redis or PostgreSQL refused a write
    /// made with it).
    /// - Returns: whether it was given up now.
    @discardableResult
    public func lose(_ slot: UInt16, epoch: Int64) -> Bool {
        states.withLock { states in
            guard states[Int(slot)].epoch == epoch else { return false }
            states[Int(slot)] = .notOwned
            return true
        }
    }
}
