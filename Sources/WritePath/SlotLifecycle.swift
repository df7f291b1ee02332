/// The one place a slot's ownership moves: a table of from-state × event → to-state and what to
/// do about it. Pure: the shard that owns the slot (`ShardStateMachine`) asks it on every event
/// and performs the effects; a pair the table does not list is refused (`nil`) and changes
/// nothing.
///
/// ```
/// notOwned ──claim(e)──▶ claiming(e) ──keyHeld(e)──▶ draining(e) ──drained──▶ serving(e)
///     ▲                      │ keyHeld(>e), keyFailed      │ drainFailed          │ release
///     │                      ▼                             ▼                      ▼
///     ├──────────────── notOwned ◀──────────────────────────┘          quiescing(e) ──batchEnded──▶ flushing(e)
///     │                                                                    resume ▲        flushed │
///     └──────────── handedOff(e′) ◀── handingOver(e) ◀─────────────────────────────────────────────┘
/// fenced(e) or drop from any owned state: notOwned (its backlog forgotten, its parked operations refused)
///
/// serving(e) or draining(e) ──failedOver──▶ repairing(e) ──drained (then its posts leave Redis)──▶ repairing(e) ──hotSetDropped──▶ serving(e)
/// ```
enum SlotLifecycle {
    /// One slot as its shard sees it.
    enum State: Hashable, Sendable {
        /// Another node owns it, or nobody does: nothing is decided or flushed here.
        case notOwned
        /// Won under `epoch` in PostgreSQL; its epoch key in Redis is being raised to it.
        case claiming(epoch: Int64)
        /// The epoch key holds `epoch`: the slot's log is being drained to PostgreSQL before it
        /// is served (flushes run under `epoch`; operations wait).
        case draining(epoch: Int64)
        /// Decided, written and flushed here under `epoch`.
        case serving(epoch: Int64)
        /// Being handed to another node: new operations wait while the batch in flight ends.
        case quiescing(epoch: Int64)
        /// Being handed off: what was written under `epoch` is being flushed.
        case flushing(epoch: Int64)
        /// Being handed off, everything flushed: the owner is being changed in PostgreSQL.
        case handingOver(epoch: Int64)
        /// Its Redis master failed over (a replica took its place, without what it had not
        /// replicated): operations wait while its log is drained to PostgreSQL and then every
        /// post Redis holds of it is dropped, so each is read from PostgreSQL again.
        case repairing(epoch: Int64)

        /// The epoch held, unless not owned.
        var epoch: Int64? {
            switch self {
            case .notOwned: return nil
            case .claiming(let epoch), .draining(let epoch), .serving(let epoch), .quiescing(let epoch),
                .flushing(let epoch), .handingOver(let epoch), .repairing(let epoch):
                return epoch
            }
        }

        /// What the rest of the node sees (`OwnedSlots`).
        var published: OwnedSlots.State {
            switch self {
            case .notOwned: return .notOwned
            case .claiming(let epoch), .draining(let epoch), .repairing(let epoch): return .acquiring(epoch: epoch)
            case .serving(let epoch): return .serving(epoch: epoch)
            case .quiescing(let epoch), .flushing(let epoch), .handingOver(let epoch): return .releasing(epoch: epoch)
            }
        }

        /// The epoch a batch beginning now writes the slot under, or `nil` when it may not.
        var batchEpoch: Int64? {
            if case .serving(let epoch) = self { return epoch }
            return nil
        }

        /// The epoch the slot's log is flushed under, or `nil` when it is not flushed here:
        /// while it is drained before serving, served, and handed off (its last flush).
        var flushEpoch: Int64? {
            switch self {
            case .notOwned, .claiming: return nil
            case .draining(let epoch), .serving(let epoch), .quiescing(let epoch), .flushing(let epoch), .handingOver(let epoch),
                .repairing(let epoch):
                return epoch
            }
        }

        /// What an operation arriving for the slot does.
        var admission: Admission {
            switch self {
            case .serving: return .decide
            case .claiming, .draining, .quiescing, .flushing, .handingOver, .repairing: return .wait
            case .notOwned: return .elsewhere
            }
        }

        /// Every state with `epoch` (for the table's exhaustive test).
        static func all(epoch: Int64) -> [State] {
            [
                .notOwned, .claiming(epoch: epoch), .draining(epoch: epoch), .serving(epoch: epoch), .quiescing(epoch: epoch),
                .flushing(epoch: epoch), .handingOver(epoch: epoch), .repairing(epoch: epoch),
            ]
        }
    }

    /// What an operation on a slot does.
    enum Admission: Equatable {
        /// Decide it in the next batch.
        case decide
        /// Park it until the slot settles (served, or gone), at most `slotMoveWait`.
        case wait
        /// Refuse it: another node decides it (`notOwner`).
        case elsewhere
    }

    /// What happens to a slot.
    enum Event: Hashable, Sendable {
        /// The membership won it in PostgreSQL (or PostgreSQL gives it to this node) under `epoch`.
        case claim(epoch: Int64)
        /// Raising the epoch key left it holding `held` (the claim's epoch, or a higher one: a
        /// later claim got there first).
        case keyHeld(Int64)
        /// The epoch key could not be raised (Redis failed).
        case keyFailed
        /// Everything its log held is in PostgreSQL.
        case drained
        /// Its log could not be read for the drain.
        case drainFailed
        /// The membership hands it to another node.
        case release
        /// The batch that was in flight when the release began has ended.
        case batchEnded
        /// What was written for it is in PostgreSQL.
        case flushed
        /// The hand-off failed before the owner changed: serve it again.
        case resume
        /// PostgreSQL gives it to another node now, under `newEpoch`.
        case handedOff(newEpoch: Int64)
        /// Redis or PostgreSQL refused a write made under `epoch`: another node holds it.
        case fenced(epoch: Int64)
        /// The membership found it is another node's: stop at once.
        case drop
        /// Its Redis master failed over: Redis may have lost what the master acknowledged last.
        case failedOver
        /// Every post Redis held of it is dropped (the repair's last step).
        case hotSetDropped

        /// Every event with `epoch` and `other` (for the table's exhaustive test).
        static func all(epoch: Int64, other: Int64) -> [Event] {
            [
                .claim(epoch: epoch), .claim(epoch: other), .keyHeld(epoch), .keyHeld(other), .keyFailed, .drained, .drainFailed,
                .release, .batchEnded, .flushed, .resume, .handedOff(newEpoch: other), .fenced(epoch: epoch), .fenced(epoch: other), .drop,
                .failedOver, .hotSetDropped,
            ]
        }
    }

    /// What the shard does after a move.
    enum Effect: Hashable, Sendable {
        /// Raise the slot's epoch key in Redis to this epoch (`SlotEpochKeys.raise`).
        case raiseEpochKey(Int64)
        /// Read the slot's log again and flush what it holds before serving (`keyHeld`'s drain).
        case drainLog
        /// Flush what was written for the slot (a hand-off's flush).
        case flushLog
        /// Forget what the flusher knew of the slot's log: another node drains it.
        case forgetBacklog
        /// Operations parked on the slot go to the next batch.
        case admitParked
        /// Operations parked on the slot are refused (`notOwner`: the owner decides them).
        case refuseParked
        /// Tell the caller of `release` that the slot is ready to change owner.
        case readyToHandOver
        /// Drop every post Redis holds of the slot (its log is in PostgreSQL, nothing waits),
        /// then `hotSetDropped`.
        case dropHotSet
    }

    /// A legal move: where the slot goes and what the shard does about it.
    struct Transition: Hashable {
        let to: State
        let effects: [Effect]
    }

    /// The move `event` makes from `state`, or `nil` when the table has none (refused: the
    /// slot stays as it is).
    static func transition(from state: State, on event: Event) -> Transition? {
        switch (state, event) {
        // Claims: a new epoch starts over; the epoch already held is no news.
        case (.notOwned, .claim(let epoch)):
            return Transition(to: .claiming(epoch: epoch), effects: [.raiseEpochKey(epoch)])
        case (.claiming(let held), .claim(let epoch)), (.draining(let held), .claim(let epoch)),
            (.serving(let held), .claim(let epoch)), (.repairing(let held), .claim(let epoch)):
            if epoch == held { return Transition(to: state, effects: []) }
            return Transition(to: .claiming(epoch: epoch), effects: [.forgetBacklog, .raiseEpochKey(epoch)])
        case (.quiescing, .claim), (.flushing, .claim), (.handingOver, .claim):
            // A claim while handing the slot off would race the hand-off's own change of owner.
            return nil

        // The epoch key, raised for a claim.
        case (.claiming(let epoch), .keyHeld(let held)):
            if held == epoch { return Transition(to: .draining(epoch: epoch), effects: [.drainLog]) }
            if held > epoch { return Transition(to: .notOwned, effects: [.refuseParked]) }
            return nil
        case (.claiming, .keyFailed):
            return Transition(to: .notOwned, effects: [.refuseParked])

        // The drain before serving.
        case (.draining(let epoch), .drained):
            return Transition(to: .serving(epoch: epoch), effects: [.admitParked])
        case (.draining, .drainFailed):
            return Transition(to: .notOwned, effects: [.forgetBacklog, .refuseParked])

        // A repair after a Redis failover: drain the log (what survived the failover reaches
        // PostgreSQL; a failed drain is tried again), then drop the slot's posts from Redis.
        case (.serving(let epoch), .failedOver), (.repairing(let epoch), .failedOver), (.repairing(let epoch), .drainFailed),
            (.draining(let epoch), .failedOver):
            // (A slot being drained for a claim is repaired instead of served: its claim waits.)
            return Transition(to: .repairing(epoch: epoch), effects: [.drainLog])
        case (.repairing(let epoch), .drained):
            return Transition(to: .repairing(epoch: epoch), effects: [.dropHotSet])
        case (.repairing(let epoch), .hotSetDropped):
            return Transition(to: .serving(epoch: epoch), effects: [.admitParked])

        // A hand-off.
        case (.serving(let epoch), .release):
            return Transition(to: .quiescing(epoch: epoch), effects: [])
        case (.quiescing(let epoch), .batchEnded):
            return Transition(to: .flushing(epoch: epoch), effects: [.flushLog])
        case (.flushing(let epoch), .flushed):
            return Transition(to: .handingOver(epoch: epoch), effects: [.readyToHandOver])
        case (.quiescing(let epoch), .resume), (.flushing(let epoch), .resume), (.handingOver(let epoch), .resume):
            return Transition(to: .serving(epoch: epoch), effects: [.admitParked])
        case (.handingOver, .handedOff(let newEpoch)):
            return Transition(to: .notOwned, effects: [.raiseEpochKey(newEpoch), .forgetBacklog, .refuseParked])

        // Another node holds it: refused writes under the epoch held, or the membership says so.
        case (.notOwned, .fenced), (.notOwned, .drop):
            return Transition(to: .notOwned, effects: [])
        case (_, .fenced(let epoch)):
            if state.epoch != epoch { return Transition(to: state, effects: []) }
            return Transition(to: .notOwned, effects: [.forgetBacklog, .refuseParked])
        case (_, .drop):
            return Transition(to: .notOwned, effects: [.forgetBacklog, .refuseParked])

        default:
            return nil
        }
    }
}
