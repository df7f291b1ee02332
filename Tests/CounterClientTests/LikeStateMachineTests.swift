import CounterClient
import Testing

/// Scripted sequences of taps and answers, checked step by step.
@Suite("Optimistic like state (pure)")
struct LikeStateMachineTests {
    typealias Confirmed = LikeStateMachine.Confirmed

    /// A tap that must produce a request.
    static func tap(_ machine: inout LikeStateMachine) throws -> LikeStateMachine.Request {
        let request = machine.tap()
        return try #require(request)
    }

    /// A tap while a request is in flight: it must not produce one.
    static func tapIsCoalesced(_ machine: inout LikeStateMachine) -> Bool {
        machine.tap() == nil
    }

    static func liked(_ isLiked: Bool, _ count: Int64) -> Result<Confirmed, CounterClientError> {
        .success(Confirmed(isLiked: isLiked, likesCount: count))
    }

    @Test("single tap: shown at once, one PUT of the wanted state, success confirms it")
    func singleTap() throws {
        var machine = LikeStateMachine(isLiked: false, likesCount: 10)
        let request = try Self.tap(&machine)
        #expect(request.kind == .setLiked(true))
        #expect(machine.isLiked && machine.likesCount == 11 && machine.isBusy)
        let (next, event) = machine.receive(Self.liked(true, 11), for: request.id)
        #expect(next == nil)
        #expect(event == .succeeded(Confirmed(isLiked: true, likesCount: 11)))
        #expect(machine.isLiked && machine.likesCount == 11 && !machine.isBusy)
    }

    @Test("tap then failure: rolls back to the last confirmed state and reports the error")
    func tapThenFailure() throws {
        var machine = LikeStateMachine(isLiked: true, likesCount: 5)
        let request = try Self.tap(&machine)
        #expect(request.kind == .setLiked(false))
        #expect(!machine.isLiked && machine.likesCount == 4)
        let error = CounterClientError.server(status: 503, code: "backlog_full", message: "later", retryAfterSeconds: 1)
        let (next, event) = machine.receive(.failure(error), for: request.id)
        #expect(next == nil)
        #expect(event == .failed(error))
        #expect(machine.isLiked && machine.likesCount == 5 && !machine.isBusy)
    }

    @Test("double tap within one round trip: two requests, ending in the last tap's state")
    func doubleTap() throws {
        var machine = LikeStateMachine(isLiked: false, likesCount: 10)
        let first = try Self.tap(&machine)
        #expect(Self.tapIsCoalesced(&machine)) // coalesced while the first is in flight
        #expect(!machine.isLiked && machine.likesCount == 10)
        let (second, noEvent) = machine.receive(Self.liked(true, 11), for: first.id)
        #expect(noEvent == nil)
        #expect(second?.kind == .setLiked(false)) // the one more request
        #expect(!machine.isLiked && machine.likesCount == 10)
        let (none, event) = machine.receive(Self.liked(false, 10), for: second!.id)
        #expect(none == nil)
        #expect(event == .succeeded(Confirmed(isLiked: false, likesCount: 10)))
    }

    @Test("triple tap within one round trip: the answer already matches the last tap, so one request")
    func tripleTap() throws {
        var machine = LikeStateMachine(isLiked: false, likesCount: 10)
        let first = try Self.tap(&machine)
        #expect(Self.tapIsCoalesced(&machine))
        #expect(Self.tapIsCoalesced(&machine))
        #expect(machine.isLiked && machine.likesCount == 11)
        let (next, event) = machine.receive(Self.liked(true, 11), for: first.id)
        #expect(next == nil)
        #expect(event == .succeeded(Confirmed(isLiked: true, likesCount: 11)))
    }

    @Test("four taps: still at most two requests in all, final state = last tap")
    func fourTaps() throws {
        var machine = LikeStateMachine(isLiked: false, likesCount: 3)
        var sent = [try Self.tap(&machine)]
        for _ in 1...3 { #expect(Self.tapIsCoalesced(&machine)) }
        let (second, _) = machine.receive(Self.liked(true, 4), for: sent[0].id)
        sent.append(try #require(second))
        let (third, event) = machine.receive(Self.liked(false, 3), for: sent[1].id)
        #expect(third == nil)
        #expect(!machine.isLiked && machine.likesCount == 3)
        #expect(event == .succeeded(Confirmed(isLiked: false, likesCount: 3)))
    }

    @Test("the service's count wins: other users' likes show up in the answer")
    func countChangedByOthers() throws {
        var machine = LikeStateMachine(isLiked: false, likesCount: 10)
        let request = try Self.tap(&machine)
        #expect(machine.likesCount == 11)
        _ = machine.receive(Self.liked(true, 57), for: request.id)
        #expect(machine.isLiked && machine.likesCount == 57)
    }

    @Test("an answer arriving after a newer tap does not undo the tap; its count is still used")
    func answerAfterNewerTap() throws {
        var machine = LikeStateMachine(isLiked: false, likesCount: 10)
        let request = try Self.tap(&machine) // wants liked
        #expect(Self.tapIsCoalesced(&machine)) // now wants not liked
        let (next, _) = machine.receive(Self.liked(true, 30), for: request.id)
        #expect(!machine.isLiked) // still the newer tap
        #expect(machine.likesCount == 29) // 30 from the service, minus the pending unlike
        #expect(next?.kind == .setLiked(false))
    }

    @Test("answers to anything but the request in flight are ignored")
    func staleAnswers() throws {
        var machine = LikeStateMachine(isLiked: false, likesCount: 1)
        let request = try Self.tap(&machine)
        let (next, event) = machine.receive(Self.liked(false, 99), for: request.id + 7)
        #expect(next == nil && event == nil)
        #expect(machine.isLiked && machine.likesCount == 2 && machine.isBusy)
        _ = machine.receive(Self.liked(true, 2), for: request.id)
        let (again, againEvent) = machine.receive(Self.liked(false, 0), for: request.id) // twice: ignored
        #expect(again == nil && againEvent == nil)
        #expect(machine.isLiked && machine.likesCount == 2)
    }

    @Test("timeout: rollback and an error event, then a read learns what the service holds")
    func timeoutThenRefresh() throws {
        var machine = LikeStateMachine(isLiked: false, likesCount: 10)
        let request = try Self.tap(&machine)
        let (refresh, event) = machine.receive(.failure(.timedOut(seconds: 10)), for: request.id)
        #expect(event == .failed(.timedOut(seconds: 10)))
        #expect(!machine.isLiked && machine.likesCount == 10) // rolled back
        #expect(refresh?.kind == .refresh)
        // The like had in fact been applied: the button now shows it, without another request.
        let (next, quiet) = machine.receive(Self.liked(true, 11), for: refresh!.id)
        #expect(next == nil && quiet == nil)
        #expect(machine.isLiked && machine.likesCount == 11 && !machine.isBusy)
    }

    @Test("timeout, then a tap while the read is in flight: the tap wins over the service's state")
    func tapDuringRefresh() throws {
        var machine = LikeStateMachine(isLiked: false, likesCount: 10)
        let request = try Self.tap(&machine)
        let (refresh, _) = machine.receive(.failure(.timedOut(seconds: 10)), for: request.id)
        #expect(Self.tapIsCoalesced(&machine)) // wants liked again; coalesced
        #expect(machine.isLiked && machine.likesCount == 11)
        let (next, _) = machine.receive(Self.liked(false, 10), for: refresh!.id) // it had not been applied
        #expect(next?.kind == .setLiked(true))
        let (_, event) = machine.receive(Self.liked(true, 11), for: next!.id)
        #expect(event == .succeeded(Confirmed(isLiked: true, likesCount: 11)))
    }

    @Test("a failing read after a timeout: a tap made meanwhile is rolled back and reported")
    func refreshFails() throws {
        var machine = LikeStateMachine(isLiked: true, likesCount: 4)
        let request = try Self.tap(&machine)
        let (refresh, _) = machine.receive(.failure(.connection(message: "reset", requestMayHaveSucceeded: true)), for: request.id)
        #expect(Self.tapIsCoalesced(&machine)) // wants not liked again
        let failure = CounterClientError.connection(message: "refused", requestMayHaveSucceeded: false)
        let (next, event) = machine.receive(.failure(failure), for: refresh!.id)
        #expect(next == nil)
        #expect(event == .failed(failure))
        #expect(machine.isLiked && machine.likesCount == 4 && !machine.isBusy)
    }

    @Test("a refused connection is a plain failure: nothing can have been applied, so no read")
    func refusedIsCertain() throws {
        var machine = LikeStateMachine(isLiked: false, likesCount: 0)
        let request = try Self.tap(&machine)
        let (next, event) = machine.receive(.failure(.connection(message: "refused", requestMayHaveSucceeded: false)), for: request.id)
        #expect(next == nil)
        #expect(event != nil)
        #expect(!machine.isLiked && machine.likesCount == 0)
    }

    @Test("a feed's report is taken while idle, ignored while a request is in flight; counts never go negative")
    func serverReports() throws {
        var machine = LikeStateMachine(isLiked: false, likesCount: 0)
        machine.serverReported(Confirmed(isLiked: true, likesCount: 8))
        #expect(machine.isLiked && machine.likesCount == 8)
        let request = try Self.tap(&machine)
        machine.serverReported(Confirmed(isLiked: true, likesCount: 100))
        #expect(!machine.isLiked && machine.likesCount == 7)
        _ = machine.receive(Self.liked(false, 0), for: request.id)
        var odd = LikeStateMachine(isLiked: true, likesCount: 0) // a count the service had not caught up with
        _ = odd.tap()
        #expect(odd.likesCount == 0)
    }
}
