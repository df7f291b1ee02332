import Foundation

/// The `curl` and `nghttp` command lines, for what the tests' own HTTP/1.1 client does not
/// speak: HTTP/2 (cleartext by prior knowledge, and over TLS by ALPN). (curl 7.88's `--parallel`
/// with prior knowledge fails on its second stream whatever the server: `nghttp` multiplexes.)
public enum Curl {
    /// Runs `curl -sS` with `arguments`; its exit status and the lines it printed.
    public static func run(_ arguments: [String], timeout: Duration = .seconds(60)) async throws -> (status: Int32, lines: [String]) {
        let process = try ChildProcess(["/usr/bin/curl", "-sS"] + arguments, mergingStandardError: true)
        let status = try await process.waitForExit(timeout: timeout)
        return (status, process.output)
    }

    /// Runs `nghttp` (nghttp2's client: HTTP/2 only) on `urls`, which it requests all at once
    /// over one connection, with `headers`; its exit status and the answers' bodies, as lines.
    public static func nghttp(_ urls: [String], headers: [String] = [], timeout: Duration = .seconds(60)) async throws -> (
        status: Int32, lines: [String]
    ) {
        let process = try ChildProcess(["/usr/bin/nghttp"] + headers.flatMap { ["-H", $0] } + urls, mergingStandardError: true)
        let status = try await process.waitForExit(timeout: timeout)
        return (status, process.output)
    }

    /// A self-signed certificate for 127.0.0.1 and its key, made with `openssl` in a new
    /// temporary folder: (certificate, key).
    public static func selfSignedCertificate() async throws -> (certificate: String, key: String) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("counter-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let certificate = folder.appendingPathComponent("cert.pem").path
        let key = folder.appendingPathComponent("key.pem").path
        let process = try ChildProcess(
            [
                "/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", key, "-out", certificate, "-days", "2", "-subj", "/CN=127.0.0.1",
                "-addext", "subjectAltName=IP:127.0.0.1",
            ], mergingStandardError: true)
        let status = try await process.waitForExit()
        guard status == 0 else { throw PrivateServersError(message: "openssl failed: \(process.lastLines)") }
        return (certificate, key)
    }
}
