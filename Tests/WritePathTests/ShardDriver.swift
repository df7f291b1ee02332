import Foundation
import Persistence
import ShardRouter
import Synchronization

@testable import WritePath

/// The timers a driven shard machine set, kept as its shell (`ShardTimers`) keeps them: each
/// `setTimer` replaces the timer's deadline, `cancelTimer` forgets it, and a timer that fires is
/// forgotten.
struct ModelTimers {
    private(set) var deadlines: [ShardStateMachine.Timer: ContinuousClock.Instant] = [:]

    /// Takes the timer actions among `actions`.
    mutating func take(_ action: ShardStateMachine.Action) {
        switch action {
        case .setTimer(let timer, let at): deadlines[timer] = at
        case .cancelTimer(let timer): deadlines[timer] = nil
        default: break
        }
    }

    /// The timer due first, and when.
    var next: (timer: ShardStateMachine.Timer, at: ContinuousClock.Instant)? {
        deadlines.min { ($0.value, $0.key.rawValue) < ($1.value, $1.key.rawValue) }.map { ($0.key, $0.value) }
    }

    /// The timers due at `now`, in order, forgotten as they fire.
    mutating func fire(at now: ContinuousClock.Instant) -> [ShardStateMachine.Timer] {
        let due = deadlines.filter { $0.value <= now }.sorted { ($0.value, $0.key.rawValue) < ($1.value, $1.key.rawValue) }.map(\.key)
        for timer in due { deadlines[timer] = nil }
        return due
    }
}

/// One shard's machine driven step by step against a `ShardWorld`: the I/O actions it asks for
/// queue and run one at a time, in order (`run`), or as a test picks them; answers, replies and
/// log lines are taken at once; its timers are kept as a shell keeps them and fire when the
/// driver moves time on to them.
final class ShardDriver {
    let world: ShardWorld
    var machine: ShardStateMachine
    var now = ContinuousClock.now
    /// I/O actions asked for and not yet performed, oldest first.
    var pending: [ShardStateMachine.Action] = []
    var timers = ModelTimers()
    /// I/O results delivered so far by `run`.
    var steps = 0
    let replies = Replies()
    /// The events of the log lines the machine wrote, in order.
    var logged: [String] = []

    init(world: ShardWorld, slotRange: Range<Int>, configuration: WritePathConfiguration, isFenced: Bool = true) {
        self.world = world
        self.machine = ShardStateMachine(index: 0, slotRange: slotRange, configuration: configuration, isFenced: isFenced, now: now)
    }

    /// Hands `event` to the machine now.
    func deliver(_ event: ShardStateMachine.Event) {
        var actions: [ShardStateMachine.Action] = []
        machine.handle(event, now: now, into: &actions)
        for action in actions {
            switch action {
            case .answer(let answers):
                for (operation, result) in answers { operation.answer(result) }
            case .answerBatch(let operations, let answers):
                for answer in answers { operations[answer.request].answer(answer.result) }
            case .reply(let delivery):
                delivery.run()
            case .log(let line):
                logged.append(line.event)
            case .setTimer, .cancelTimer:
                timers.take(action)
            default:
                pending.append(action)
            }
        }
    }

    /// Moves time on by `duration`, firing the timers due meanwhile at their deadlines.
    func advance(by duration: Duration) {
        let end = now + duration
        while let next = timers.next, next.at <= end {
            now = max(now, next.at)
            for timer in timers.fire(at: now) { deliver(.timerFired(timer)) }
        }
        now = end
    }

    /// Moves time on to the next timer and fires it; `false` when no timer is set.
    @discardableResult
    func fireNextTimer() -> Bool {
        guard let next = timers.next else { return false }
        now = max(now, next.at)
        for timer in timers.fire(at: now) { deliver(.timerFired(timer)) }
        return true
    }

    /// Performs what the machine asked and what that leads to, oldest first, without time passing
    /// (a timer already due fires); `false` when it did not settle within `rounds` steps.
    @discardableResult
    func settle(rounds: Int = 10_000) -> Bool {
        for _ in 0..<rounds {
            if !pending.isEmpty {
                perform(pending.removeFirst())
            } else if let next = timers.next, next.at <= now {
                for timer in timers.fire(at: now) { deliver(.timerFired(timer)) }
            } else {
                return true
            }
        }
        return false
    }

    /// Performs `action` against the world and delivers its result, if it brings one.
    func perform(_ action: ShardStateMachine.Action) {
        if let event = world.perform(action) { deliver(event) }
    }

    /// Runs pending actions (oldest first) until nothing is left, moving time on to the next timer
    /// when only timers remain (until the machine finishes); before delivering I/O result number
    /// `meddleAt`, calls `meddle`.
    func run(meddleAt: Int? = nil, _ meddle: (ShardDriver) -> Void = { _ in }, rounds: Int = 2_000) {
        for _ in 0..<rounds {
            if pending.isEmpty {
                guard !machine.isFinished, fireNextTimer() else { return }
                continue
            }
            let action = pending.removeFirst()
            guard let event = world.perform(action) else { continue }
            steps += 1
            if steps == meddleAt { meddle(self) }
            deliver(event)
        }
    }

    /// Performs pending actions (oldest first) but holds back those `hold` picks; returns them.
    func run(holding hold: (ShardStateMachine.Action) -> Bool, rounds: Int = 400) -> [ShardStateMachine.Action] {
        var held: [ShardStateMachine.Action] = []
        for _ in 0..<rounds {
            guard !pending.isEmpty else { break }
            let action = pending.removeFirst()
            if hold(action) {
                held.append(action)
                continue
            }
            perform(action)
        }
        return held
    }

    /// Submits `requests` as one arrival; their answers are recorded in `replies` under `label`.
    func submit(_ requests: [ShardDecider.Request], label: String) {
        let replies = self.replies
        let operations = requests.enumerated().map { offset, request in
            ShardOperation(request) { result in replies.add("\(label) \(offset): \(result)") }
        }
        deliver(.operations(operations))
    }

    func reply<Value: Sendable>(_ label: String) -> ShardReply<Value> {
        let replies = self.replies
        return ShardReply { value in replies.add("\(label): \(value)") }
    }
}

/// What the callers of a driven shard were told.
final class Replies: Sendable {
    private let list = Mutex<[String]>([])
    func add(_ reply: String) { list.withLock { $0.append(reply) } }
    var all: [String] { list.withLock { $0 } }
}

/// Posts whose hash slot is `slot`: the first `count` ids from 1 up.
func posts(inSlot slot: UInt16, count: Int = 1) -> [Int64] {
    Array((Int64(1)...).lazy.filter { HashSlot(post: $0).rawValue == slot }.prefix(count))
}
