import CounterClient
import Foundation
import Testing

@Suite("Like button model")
@MainActor
struct LikeButtonModelTests {
    @Test("taps show at once; taps during a request are coalesced; the answer is reconciled; events reach onEvent")
    func coalescing() async {
        let service = HeldRequests()
        let model = LikeButtonModel(post: 1, user: 7, isLiked: false, likesCount: 10, send: service.sender)
        var events: [LikeButtonModel.Event] = []
        model.onEvent = { events.append($0) }
        model.tap()
        #expect(model.isLiked && model.likesCount == 11 && model.isSending)
        model.tap()
        model.tap()
        model.tap()
        #expect(!model.isLiked && model.likesCount == 10)
        await service.waitFor(1)
        #expect(service.answer(.success(.init(isLiked: true, likesCount: 15))) == .setLiked(true))
        await service.waitFor(2)
        #expect(!model.isLiked && model.likesCount == 14) // others liked meanwhile; the unlike still shows
        #expect(service.answer(.success(.init(isLiked: false, likesCount: 14))) == .setLiked(false))
        await model.settled()
        #expect(service.count == 2)
        #expect(!model.isLiked && model.likesCount == 14 && !model.isSending)
        #expect(events == [.succeeded(.init(isLiked: false, likesCount: 14))])
        #expect(model.lastEvent == events.last && model.eventCount == 1)
    }

    @Test("a failure rolls back and reports .failed for the haptic")
    func rollback() async {
        let service = HeldRequests()
        let model = LikeButtonModel(post: 1, user: 7, isLiked: true, likesCount: 3, send: service.sender)
        model.tap()
        #expect(!model.isLiked && model.likesCount == 2)
        await service.waitFor(1)
        service.answer(.failure(.server(status: 404, code: "post_not_found", message: "gone", retryAfterSeconds: nil)))
        await model.settled()
        #expect(model.isLiked && model.likesCount == 3)
        #expect(model.lastEvent == .failed(.server(status: 404, code: "post_not_found", message: "gone", retryAfterSeconds: nil)))
    }

    @Test("a timed-out request against a server that never answers: rollback, error event, then a read")
    func realTimeout() async throws {
        // A listening socket that accepts nothing and answers nothing.
        let listener = try SilentListener()
        var configuration = CounterServiceClient.Configuration(baseURL: URL(string: "http://127.0.0.1:\(listener.port)")!)
        configuration.timeout = .milliseconds(500)
        configuration.retry = .never
        let client = CounterServiceClient(configuration: configuration)
        let model = LikeButtonModel(post: 1, user: 7, isLiked: false, likesCount: 0, client: client)
        let started = ContinuousClock.now
        model.tap()
        #expect(model.isLiked)
        await model.settled() // the PUT times out, then the read times out too
        // Two attempts of 0.5 s each, ended by the client's own deadline: its error says 0.5 s
        // (URLSession's backstop, at the deadline plus 2 s, would say 3 s). That is about 1 s
        // alone; a CI machine running every suite at once once took 35 s, so the bound only
        // catches a hang.
        #expect(ContinuousClock.now - started < .seconds(60))
        #expect(!model.isLiked && model.likesCount == 0)
        guard case .failed(let error)? = model.lastEvent else {
            Issue.record("no failure event")
            return
        }
        #expect(error == .timedOut(seconds: 0.5), "\(error)")
        #expect(error.outcomeUnknown, "\(error)")
    }
}

/// A TCP listener on a free loopback port that never accepts: connections complete in the
/// kernel's backlog, requests get no answer.
final class SilentListener {
    let descriptor: Int32
    let port: Int

    init() throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.descriptor = descriptor
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(descriptor, 16) == 0 else { throw CounterClientError.invalidArgument("cannot listen") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(descriptor) }
}
