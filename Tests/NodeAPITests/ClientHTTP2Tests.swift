import Foundation
import NodeHTTP
import NodeTestSupport
import TestSupport
import Testing

/// `CounterServiceClient` over HTTPS, where the platform's URLSession negotiates HTTP/2 by ALPN.
/// On Linux that is FoundationNetworking on libcurl, which trusts only the system's certificate
/// bundle: the client runs as a process of its own (`ClientProbe`) in a private mount namespace
/// whose bundle is the test's self-signed certificate. The machine's trust store is not touched.
@Suite("Client library over HTTP/2")
struct ClientHTTP2Tests {
    private static let bundle = "/etc/ssl/certs/ca-certificates.crt"

    /// `command` run where the system bundle is `certificate` only (a mount namespace of its own;
    /// a user namespace too when not root).
    static func trusting(_ certificate: String, _ command: [String]) -> [String] {
        let namespaces = geteuid() == 0 ? ["--mount"] : ["--user", "--map-root-user", "--mount"]
        return ["/usr/bin/unshare"] + namespaces + [
            "/bin/sh", "-c", #"mount --bind "$0" "$1" && shift && exec "$@""#, certificate, bundle,
        ] + command
    }

    static func start() async throws -> (HTTPHarness, tlsPort: Int, certificate: String) {
        let files = try await Curl.selfSignedCertificate()
        let http = try await HTTPHarness.start(posts: 1) {
            $0.tls = HTTPTLSListener(host: "127.0.0.1", port: 0, certificateFile: files.certificate, keyFile: files.key)
        }
        return (http, try #require(http.server.tlsPort), files.certificate)
    }

    @Test("over HTTPS the client speaks HTTP/2: 30 likes at once, each read back, every request counted as HTTP/2, PostgreSQL exact")
    func likesOverHTTP2() async throws {
        let (http, tlsPort, certificate) = try await Self.start()
        let post = http.posts[0]
        let before = try await http.requestsOverHTTP2()
        let probe = try ChildProcess(
            Self.trusting(
                certificate, [ChildProcess.builtProduct("ClientProbe"), "https://127.0.0.1:\(tlsPort)", HTTPHarness.apiToken, "\(post)", "30"]),
            mergingStandardError: true)
        #expect(try await probe.waitForExit(timeout: .seconds(120)) == 0, "\(probe.lastLines)")
        #expect(probe.output.contains("liked 30") && probe.output.contains("count 30"), "\(probe.lastLines)")
        // 30 likes and 30 reads, all over HTTP/2 (the test's own requests are HTTP/1.1).
        #expect(try await http.requestsOverHTTP2() - before == 60)
        #expect(try await http.send("POST", "/admin/flush", token: HTTPHarness.adminToken).status == 200)
        let counts = try await http.writePath.postgresCounts()
        #expect(counts[post]?.count == 30 && counts[post]?.rows == 30, "\(String(describing: counts[post]))")
        await http.stop()
    }

    @Test("the same client without the certificate trusted refuses the node: it fails, nothing is liked")
    func untrustedCertificate() async throws {
        let (http, tlsPort, _) = try await Self.start()
        let post = http.posts[0]
        let probe = try ChildProcess(
            [ChildProcess.builtProduct("ClientProbe"), "https://127.0.0.1:\(tlsPort)", HTTPHarness.apiToken, "\(post)", "3"],
            mergingStandardError: true)
        #expect(try await probe.waitForExit(timeout: .seconds(120)) == 1, "\(probe.lastLines)")
        #expect(try await http.writePath.redisCount(post) == 0)
        #expect(try await http.requestsOverHTTP2() == 0)
        await http.stop()
    }
}
