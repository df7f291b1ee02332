import Foundation
import Testing

@testable import WritePath

/// The slot table, tried pair by pair: every state with every event, against the table written
/// out below — which `docs/ARCHITECTURE.md` shows as it is.
@Suite("Slot ownership table (pure)")
struct SlotLifecycleTests {
    /// The epoch held (`e`) and a later one (`e′`).
    static let held: Int64 = 5
    static let later: Int64 = 7

    static func name(_ epoch: Int64) -> String {
        switch epoch {
        case held: return "e"
        case later: return "e′"
        default: return String(epoch)
        }
    }

    static func name(_ state: SlotLifecycle.State) -> String {
        switch state {
        case .notOwned: return "notOwned"
        case .claiming(let epoch): return "claiming(\(name(epoch)))"
        case .draining(let epoch): return "draining(\(name(epoch)))"
        case .serving(let epoch): return "serving(\(name(epoch)))"
        case .quiescing(let epoch): return "quiescing(\(name(epoch)))"
        case .flushing(let epoch): return "flushing(\(name(epoch)))"
        case .handingOver(let epoch): return "handingOver(\(name(epoch)))"
        case .repairing(let epoch): return "repairing(\(name(epoch)))"
        }
    }

    static func name(_ event: SlotLifecycle.Event) -> String {
        switch event {
        case .claim(let epoch): return "claim(\(name(epoch)))"
        case .keyHeld(let epoch): return "keyHeld(\(name(epoch)))"
        case .keyFailed: return "keyFailed"
        case .drained: return "drained"
        case .drainFailed: return "drainFailed"
        case .release: return "release"
        case .batchEnded: return "batchEnded"
        case .flushed: return "flushed"
        case .resume: return "resume"
        case .handedOff(let epoch): return "handedOff(\(name(epoch)))"
        case .fenced(let epoch): return "fenced(\(name(epoch)))"
        case .drop: return "drop"
        case .failedOver: return "failedOver"
        case .hotSetDropped: return "hotSetDropped"
        }
    }

    static func name(_ effect: SlotLifecycle.Effect) -> String {
        switch effect {
        case .raiseEpochKey(let epoch): return "raise epoch key to \(name(epoch))"
        case .drainLog: return "drain log"
        case .flushLog: return "flush log"
        case .forgetBacklog: return "forget backlog"
        case .admitParked: return "admit parked"
        case .refuseParked: return "refuse parked"
        case .readyToHandOver: return "ready to hand over"
        case .dropHotSet: return "drop hot set"
        }
    }

    /// Every legal pair, as a Markdown table row; every pair not listed is refused.
    static func renderedTable() -> [String] {
        var rows: [String] = []
        for state in SlotLifecycle.State.all(epoch: held) {
            for event in SlotLifecycle.Event.all(epoch: held, other: later) {
                guard let transition = SlotLifecycle.transition(from: state, on: event) else { continue }
                let to = transition.to == state ? "(stays)" : "`\(name(transition.to))`"
                let effects = transition.effects.isEmpty ? "—" : transition.effects.map(name).joined(separator: ", ")
                rows.append("| `\(name(state))` | `\(name(event))` | \(to) | \(effects) |")
            }
        }
        return rows
    }

    /// The table as specified.
    static let expected = """
        | `notOwned` | `claim(e)` | `claiming(e)` | raise epoch key to e |
        | `notOwned` | `claim(e′)` | `claiming(e′)` | raise epoch key to e′ |
        | `notOwned` | `fenced(e)` | (stays) | — |
        | `notOwned` | `fenced(e′)` | (stays) | — |
        | `notOwned` | `drop` | (stays) | — |
        | `claiming(e)` | `claim(e)` | (stays) | — |
        | `claiming(e)` | `claim(e′)` | `claiming(e′)` | forget backlog, raise epoch key to e′ |
        | `claiming(e)` | `keyHeld(e)` | `draining(e)` | drain log |
        | `claiming(e)` | `keyHeld(e′)` | `notOwned` | refuse parked |
        | `claiming(e)` | `keyFailed` | `notOwned` | refuse parked |
        | `claiming(e)` | `fenced(e)` | `notOwned` | forget backlog, refuse parked |
        | `claiming(e)` | `fenced(e′)` | (stays) | — |
        | `claiming(e)` | `drop` | `notOwned` | forget backlog, refuse parked |
        | `draining(e)` | `claim(e)` | (stays) | — |
        | `draining(e)` | `claim(e′)` | `claiming(e′)` | forget backlog, raise epoch key to e′ |
        | `draining(e)` | `drained` | `serving(e)` | admit parked |
        | `draining(e)` | `drainFailed` | `notOwned` | forget backlog, refuse parked |
        | `draining(e)` | `fenced(e)` | `notOwned` | forget backlog, refuse parked |
        | `draining(e)` | `fenced(e′)` | (stays) | — |
        | `draining(e)` | `drop` | `notOwned` | forget backlog, refuse parked |
        | `draining(e)` | `failedOver` | `repairing(e)` | drain log |
        | `serving(e)` | `claim(e)` | (stays) | — |
        | `serving(e)` | `claim(e′)` | `claiming(e′)` | forget backlog, raise epoch key to e′ |
        | `serving(e)` | `release` | `quiescing(e)` | — |
        | `serving(e)` | `fenced(e)` | `notOwned` | forget backlog, refuse parked |
        | `serving(e)` | `fenced(e′)` | (stays) | — |
        | `serving(e)` | `drop` | `notOwned` | forget backlog, refuse parked |
        | `serving(e)` | `failedOver` | `repairing(e)` | drain log |
        | `quiescing(e)` | `batchEnded` | `flushing(e)` | flush log |
        | `quiescing(e)` | `resume` | `serving(e)` | admit parked |
        | `quiescing(e)` | `fenced(e)` | `notOwned` | forget backlog, refuse parked |
        | `quiescing(e)` | `fenced(e′)` | (stays) | — |
        | `quiescing(e)` | `drop` | `notOwned` | forget backlog, refuse parked |
        | `flushing(e)` | `flushed` | `handingOver(e)` | ready to hand over |
        | `flushing(e)` | `resume` | `serving(e)` | admit parked |
        | `flushing(e)` | `fenced(e)` | `notOwned` | forget backlog, refuse parked |
        | `flushing(e)` | `fenced(e′)` | (stays) | — |
        | `flushing(e)` | `drop` | `notOwned` | forget backlog, refuse parked |
        | `handingOver(e)` | `resume` | `serving(e)` | admit parked |
        | `handingOver(e)` | `handedOff(e′)` | `notOwned` | raise epoch key to e′, forget backlog, refuse parked |
        | `handingOver(e)` | `fenced(e)` | `notOwned` | forget backlog, refuse parked |
        | `handingOver(e)` | `fenced(e′)` | (stays) | — |
        | `handingOver(e)` | `drop` | `notOwned` | forget backlog, refuse parked |
        | `repairing(e)` | `claim(e)` | (stays) | — |
        | `repairing(e)` | `claim(e′)` | `claiming(e′)` | forget backlog, raise epoch key to e′ |
        | `repairing(e)` | `drained` | (stays) | drop hot set |
        | `repairing(e)` | `drainFailed` | (stays) | drain log |
        | `repairing(e)` | `fenced(e)` | `notOwned` | forget backlog, refuse parked |
        | `repairing(e)` | `fenced(e′)` | (stays) | — |
        | `repairing(e)` | `drop` | `notOwned` | forget backlog, refuse parked |
        | `repairing(e)` | `failedOver` | (stays) | drain log |
        | `repairing(e)` | `hotSetDropped` | `serving(e)` | admit parked |
        """

    @Test("every state with every event: the legal moves are exactly the table's, every other pair is refused and changes nothing")
    func everyPair() {
        let rendered = Self.renderedTable()
        let expected = Self.expected.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(rendered == expected)
        // 8 states × 17 events: what the table does not list is refused.
        let pairs = SlotLifecycle.State.all(epoch: Self.held).count * SlotLifecycle.Event.all(epoch: Self.held, other: Self.later).count
        #expect(pairs == 136)
        #expect(pairs - rendered.count == 84, "refused pairs")
    }

    @Test(
        "a claim never serves before its epoch key is raised and its log drained, nor a repair before its posts left Redis; a hand-off never ends before the flush"
    )
    func orderOfSteps() {
        // Breadth-first over the reachable states from notOwned, with every event: serving is
        // entered only from draining (on drained), notOwned after a hand-off only from
        // handingOver (entered only from flushing, on flushed).
        for state in SlotLifecycle.State.all(epoch: Self.held) {
            for event in SlotLifecycle.Event.all(epoch: Self.held, other: Self.later) {
                guard let transition = SlotLifecycle.transition(from: state, on: event), transition.to != state else { continue }
                if case .serving = transition.to {
                    let fromDrain = state == .draining(epoch: Self.held) && event == .drained
                    let repaired = state == .repairing(epoch: Self.held) && event == .hotSetDropped
                    let resumed = event == .resume
                    #expect(fromDrain || repaired || resumed, "\(Self.name(state)) + \(Self.name(event)) serves")
                }
                if case .handedOff = event { #expect(state == .handingOver(epoch: Self.held)) }
                if transition.effects.contains(.readyToHandOver) { #expect(state == .flushing(epoch: Self.held)) }
            }
        }
    }

    @Test("docs/ARCHITECTURE.md shows the table as the code has it")
    func documented() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("docs/ARCHITECTURE.md")
        let document = try String(contentsOf: url, encoding: .utf8)
        let documented = document.split(separator: "\n").map(String.init).filter { line in
            Self.renderedTable().contains(line)
                || (line.hasPrefix("| `") && line.contains("`) | `") && line.hasSuffix(" |")
                    && SlotLifecycle.State.all(epoch: Self.held).contains { line.hasPrefix("| `\(Self.name($0))` |") })
        }
        #expect(documented == Self.renderedTable())
    }
}
