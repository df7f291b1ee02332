import Foundation
import Synchronization
import TestSupport
import Testing

@testable import NodeHTTP

/// A handler that never answers by itself: the test holds every `respond`.
final class SilentHandler: HTTPHandler {
    let held = HeldAnswers()

    func dispatch(_ request: HTTPRequest) -> HTTPDisposition {
        .later { respond in self.held.hold(respond) }
    }

    func response(for refusal: HTTPRefusal) -> HTTPResponse {
        HTTPResponse(status: refusal == .shuttingDown ? 503 : 413, body: Array((refusal == .shuttingDown ? "shutting_down" : "body_too_large").utf8))
    }
}

@Suite("HTTP server shutdown")
struct HTTPServerShutdownTests {
    @Test("stop answers a request still waiting with 503, and a late answer is ignored")
    func stopWithWaitingRequest() async throws {
        let handler = SilentHandler()
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        let server = try HTTPServer(configuration: configuration, handler: handler)
        try server.start()
        let port = server.port
        let exchange = Task {
            try await RawHTTPClient.exchange(port: port, chunks: [RawHTTPClient.request("GET", "/anything")], responses: 1)
        }
        await handler.held.wait(untilHolding: 1)
        await server.stop(timeout: .milliseconds(200))
        let responses = try await exchange.value
        #expect(responses.first?.status == 503)
        #expect(responses.first?.text.contains("shutting_down") == true)
        // The handler answers after all: nothing happens (no resume of a connection that is gone).
        handler.held.answerAll(HTTPResponse(status: 200, body: []))
        await server.stop() // a second stop returns at once
    }
}
