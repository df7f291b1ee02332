import Foundation
import Synchronization
import TestSupport
import Testing

@testable import NodeHTTP

/// Answers every request with what it read of it — later (from another task) for paths under
/// `/later`, at once otherwise; paths under `/hold` wait until the test lets them go.
final class EchoHandler: HTTPHandler {
    let held = HeldAnswers()
    var requestHeaders: [String] { ["X-Echo"] }

    func dispatch(_ request: HTTPRequest) -> HTTPDisposition {
        let text = "\(request.method) \(request.path) ?\(request.rawQuery) body=\(request.body.count) x-echo=\(request.headers["x-echo"] ?? "-")\n"
        let response = HTTPResponse(status: 200, contentType: "text/plain", headers: ["X-Answered": "yes"], body: Array(text.utf8))
        if request.path.hasPrefix("/hold") { return .later { respond in self.held.hold(respond) } }
        guard request.path.hasPrefix("/later") else { return .respond(response) }
        return .later { respond in Task { respond(response) } }
    }

    func response(for refusal: HTTPRefusal) -> HTTPResponse {
        HTTPResponse(status: refusal == .shuttingDown ? 503 : 400, contentType: "text/plain", body: Array("refused: \(refusal)".utf8))
    }
}

@Suite("HTTP/2 and TLS")
struct HTTP2Tests {
    static func server(tls: (certificate: String, key: String)? = nil) throws -> (HTTPServer, EchoHandler) {
        let handler = EchoHandler()
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        if let tls { configuration.tls = HTTPTLSListener(host: "127.0.0.1", port: 0, certificateFile: tls.certificate, keyFile: tls.key) }
        let server = try HTTPServer(configuration: configuration, handler: handler)
        try server.start()
        return (server, handler)
    }

    @Test(
        "cleartext HTTP/2 by prior knowledge on the HTTP/1.1 port: the raw target, headers, bodies and answers as over HTTP/1.1; 300 requests multiplexed on one connection, answered now and later, each its own answer"
    )
    func priorKnowledge() async throws {
        let (server, _) = try Self.server()
        let base = "http://127.0.0.1:\(server.port)"
        let one = try await Curl.run([
            "--http2-prior-knowledge", "-H", "X-Echo: hello", "--data-binary", "12345", "-w", "%{http_version} %{http_code}\\n",
            "\(base)/later/a%2Fb?x=%41&y=1+2",
        ])
        #expect(one.status == 0, "\(one.lines)")
        #expect(one.lines == ["POST /later/a%2Fb ?x=%41&y=1+2 body=5 x-echo=hello", "2 200"])
        // The same over HTTP/1.1 on the same port.
        let old = try await Curl.run(["--http1.1", "-H", "X-Echo: hello", "-w", "%{http_version} %{http_code}\\n", "\(base)/now?q"])
        #expect(old.lines == ["GET /now ?q body=0 x-echo=hello", "1.1 200"])
        // Many streams on one connection (nghttp sends every URI at once on one HTTP/2
        // connection): each answer is its own request's.
        let paths = (0..<300).map { "/\($0 % 2 == 0 ? "later" : "now")/\($0)" }
        let many = try await Curl.nghttp(paths.map { base + $0 })
        #expect(many.status == 0, "\(many.lines.suffix(3))")
        #expect(many.lines.sorted() == paths.map { "GET \($0) ? body=0 x-echo=-" }.sorted())
        await server.stop()
    }

    @Test(
        "TLS: ALPN gives HTTP/2 or HTTP/1.1 as the client asks, cleartext goes on beside it; files that are not a certificate and its key refuse to start"
    )
    func tls() async throws {
        let files = try await Curl.selfSignedCertificate()
        let (server, _) = try Self.server(tls: files)
        let tlsPort = try #require(server.tlsPort)
        let url = "https://127.0.0.1:\(tlsPort)/later/x"
        let h2 = try await Curl.run(["--cacert", files.certificate, "-w", "%{http_version}\\n", url])
        #expect(h2.lines == ["GET /later/x ? body=0 x-echo=-", "2"], "\(h2.lines)")
        let h1 = try await Curl.run(["--http1.1", "--cacert", files.certificate, "-w", "%{http_version}\\n", url])
        #expect(h1.lines == ["GET /later/x ? body=0 x-echo=-", "1.1"], "\(h1.lines)")
        let plain = try await Curl.run(["-w", "%{http_version}\\n", "http://127.0.0.1:\(server.port)/now"])
        #expect(plain.lines == ["GET /now ? body=0 x-echo=-", "1.1"])
        await server.stop()

        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        configuration.tls = HTTPTLSListener(host: "127.0.0.1", port: 0, certificateFile: files.key, keyFile: files.certificate)
        #expect(throws: HTTPServerError.self) { try HTTPServer(configuration: configuration, handler: EchoHandler()).start() }
        configuration.tls?.certificateFile = "/nonexistent/cert.pem"
        #expect(throws: HTTPServerError.self) { try HTTPServer(configuration: configuration, handler: EchoHandler()).start() }
    }

    @Test(
        "an HTTP/2 client that leaves while its request waits: the late answer goes nowhere, the server serves on; stop answers a waiting HTTP/2 request with 503"
    )
    func clientGoneWhileWaiting() async throws {
        let (server, handler) = try Self.server()
        let base = "http://127.0.0.1:\(server.port)"
        let gone = try await Curl.run(["--http2-prior-knowledge", "--max-time", "1", "\(base)/hold/1"])
        #expect(gone.status == 28, "curl's timeout: \(gone.lines)")
        await handler.held.wait(untilHolding: 1)
        #expect(handler.held.count == 1)
        handler.held.answerAll(HTTPResponse(status: 200, body: Array("late".utf8)))
        let after = try await Curl.run(["--http2-prior-knowledge", "-w", "%{http_code}\\n", "\(base)/later/2"])
        #expect(after.lines == ["GET /later/2 ? body=0 x-echo=-", "200"])
        // A request still waiting when the server stops is answered 503, over HTTP/2 too.
        let waiting = Task { try await Curl.run(["--http2-prior-knowledge", "-w", "\\n%{http_version} %{http_code}\\n", "\(base)/hold/3"]) }
        await handler.held.wait(untilHolding: 1)
        await server.stop(timeout: .milliseconds(100))
        let answered = try await waiting.value
        #expect(answered.lines.last == "2 503", "\(answered.lines)")
    }
}
