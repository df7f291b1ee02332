import CounterClient
import Testing

/// Scripted sequences of taps and answers on a reaction picker, checked step by step.
@Suite("Optimistic reaction picker state (pure)")
struct ReactionStateMachineTests {
    typealias Confirmed = ReactionStateMachine.Confirmed

    /// A tap that must produce a request.
    static func tap(_ machine: inout ReactionStateMachine, _ kind: String) throws -> ReactionStateMachine.Request {
        let request = machine.tap(kind)
        return try #require(request)
    }

    static func state(_ mine: Set<String>, _ counts: [String: Int64]) -> Result<Confirmed, CounterClientError> {
        .success(Confirmed(mine: mine, counts: counts))
    }

    @Test("one per user: a switch is one step — one PUT of the new kind, both counts moved at once, confirmed by one answer")
    func switchIsOneStep() throws {
        var machine = ReactionStateMachine(mode: .one, mine: ["love"], counts: ["love": 4, "like": 10])
        let request = try Self.tap(&machine, "haha")
        #expect(request.kind == .set(kind: "haha", reacted: true))
        #expect(machine.mine == ["haha"] && machine.count(of: "love") == 3 && machine.count(of: "haha") == 1 && machine.total == 14)
        let (next, event) = machine.receive(Self.state(["haha"], ["love": 3, "haha": 1, "like": 10]), for: request.id)
        #expect(next == nil)
        #expect(event == .succeeded(Confirmed(mine: ["haha"], counts: ["love": 3, "haha": 1, "like": 10])))
        // Tapping the kind held takes it back: one DELETE.
        let back = try Self.tap(&machine, "haha")
        #expect(back.kind == .set(kind: "haha", reacted: false) && machine.mine.isEmpty && machine.total == 13)
    }

    @Test("taps while a request is in flight are coalesced: only the last wish is sent, once the answer is in")
    func coalescesTaps() throws {
        var machine = ReactionStateMachine(mode: .one, mine: [], counts: [:])
        let first = try Self.tap(&machine, "love")
        #expect(machine.tap("wow") == nil && machine.tap("haha") == nil)
        #expect(machine.mine == ["haha"])
        let (next, event) = machine.receive(Self.state(["love"], ["love": 1]), for: first.id)
        #expect(event == nil)
        let second = try #require(next)
        #expect(second.kind == .set(kind: "haha", reacted: true))
        #expect(machine.count(of: "love") == 0 && machine.count(of: "haha") == 1)
        let (last, done) = machine.receive(Self.state(["haha"], ["haha": 1]), for: second.id)
        #expect(last == nil && done == .succeeded(Confirmed(mine: ["haha"], counts: ["haha": 1])))
        // A wish that returns to the confirmed state sends nothing more.
        var again = ReactionStateMachine(mode: .one, mine: ["love"], counts: ["love": 1])
        let out = try Self.tap(&again, "wow")
        #expect(again.tap("love") == nil)
        let returned = again.receive(Self.state(["wow"], ["wow": 1]), for: out.id)
        #expect(returned.next?.kind == .set(kind: "love", reacted: true))
    }

    @Test("many per user: each kind its own toggle; a wish differing in several kinds is sent a kind at a time")
    func manyKinds() throws {
        var machine = ReactionStateMachine(mode: .many, mine: ["like"], counts: ["like": 2])
        let first = try Self.tap(&machine, "love")
        #expect(first.kind == .set(kind: "love", reacted: true))
        #expect(machine.tap("like") == nil)
        #expect(machine.mine == ["love"] && machine.count(of: "like") == 1 && machine.count(of: "love") == 1)
        let (next, _) = machine.receive(Self.state(["like", "love"], ["like": 2, "love": 1]), for: first.id)
        #expect(next?.kind == .set(kind: "like", reacted: false))
    }

    @Test("a refused change rolls the picker back; one whose outcome is unknown asks the service, and keeps a newer tap")
    func failures() throws {
        var machine = ReactionStateMachine(mode: .one, mine: ["love"], counts: ["love": 1])
        let request = try Self.tap(&machine, "haha")
        let refused = CounterClientError.server(status: 409, code: "too_many_kinds", message: "full", retryAfterSeconds: nil)
        let (next, event) = machine.receive(.failure(refused), for: request.id)
        #expect(next == nil && event == .failed(refused))
        #expect(machine.mine == ["love"] && machine.count(of: "haha") == 0)

        let unknown = CounterClientError.connection(message: "reset", requestMayHaveSucceeded: true)
        let second = try Self.tap(&machine, "wow")
        let (refresh, failed) = machine.receive(.failure(unknown), for: second.id)
        #expect(refresh?.kind == .refresh && failed == .failed(unknown))
        #expect(machine.tap("haha") == nil, "a tap during the refresh waits for it")
        // The service did apply wow; the user wants haha now: the refresh's answer leads there.
        let refreshID = try #require(refresh).id
        let (after, _) = machine.receive(Self.state(["wow"], ["wow": 1]), for: refreshID)
        #expect(after?.kind == .set(kind: "haha", reacted: true))
        #expect(machine.confirmed.mine == ["wow"] && machine.mine == ["haha"])
        // An answer to a request no longer in flight changes nothing.
        let stale = machine.receive(Self.state([], [:]), for: 999)
        #expect(stale.next == nil && stale.event == nil)
    }

    @Test("a feed page's state is taken while nothing is in flight; the answer of a reaction route reads into it")
    func serverReports() throws {
        var machine = ReactionStateMachine(mode: .one, mine: [], counts: [:])
        let status = ReactionStatus(
            postID: 1, userID: 7, reactions: [.init(kind: "love", count: 3), .init(kind: "like", count: 1)], total: 4, mine: ["love"])
        machine.serverReported(Confirmed(status))
        #expect(machine.mine == ["love"] && machine.counts.map(\.kind) == ["love", "like"] && machine.total == 4)
        _ = try Self.tap(&machine, "like")
        machine.serverReported(Confirmed(mine: [], counts: [:]))
        #expect(machine.mine == ["like"], "ignored while a request is in flight")
    }
}
