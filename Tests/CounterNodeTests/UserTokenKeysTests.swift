import Foundation
import TestSupport
import Testing
import UserTokens

/// Each node runs with a 30 s lease (`--lease 30s`): what these tests hold does not depend
/// on it, and with the default 3 s a node of a loaded machine whose renewals came late stopped
/// deciding (503, "cannot renew its cluster lease") in the middle of a test that is not about it.
@Suite("End users' key sets, read from a file or a URL")
struct UserTokenKeysTests {
    static func put(port: Int, post: Int64, token: String) async throws -> RawHTTPResponse {
        let request = RawHTTPClient.request("PUT", "/v1/posts/\(post)/like", token: token)
        guard let answer = try await RawHTTPClient.exchange(port: port, chunks: [request], responses: 1).first else {
            throw PrivateServersError(message: "no answer")
        }
        return answer
    }

    static func write(_ signers: [TokenSigner], to file: URL) throws {
        // Written beside, then renamed: the node never reads half a file.
        let partial = file.appendingPathExtension("partial")
        try TokenSigner.keySet(signers).write(to: partial)
        guard rename(partial.path, file.path) == 0 else { throw PrivateServersError(message: "rename failed: \(errno)") }
    }

    @Test("a key rotated in the JWKS file is taken without a restart; the withdrawn key's tokens stop working")
    func rotationThroughTheFile() async throws {
        let folder = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("counter-jwks-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("jwks.json")
        let old = TokenSigner(generating: .es256, keyID: "2026-11")
        let new = TokenSigner(generating: .rs256, keyID: "2026-12")
        try Self.write([old], to: file)

        let pool = try await TestEnvironment.migratedPool()
        let post = try await TestEnvironment.createPosts(1, in: pool)[0]
        let prefix = TestEnvironment.uniqueKeyPrefix("jwks").replacingOccurrences(of: ":", with: "-")
        let port = try PrivateServers.freePort()
        let node = try ChildProcess(
            [
                ChildProcess.builtProduct("counter-node"), "serve", "--lease", "30s", "--listen", "127.0.0.1:\(port)",
                "--postgres-url", TestEnvironment.postgresURL, "--redis-url", TestEnvironment.redisURL,
                "--key-prefix", prefix, "--log-level", "info",
                "--user-token-jwks", file.path, "--user-token-jwks-refresh", "1",
            ], mergingStandardError: true)
        try #require(try await node.waitUntilListening(), "\(node.lastLines)")
        #expect(node.output.contains { $0.contains("event=user_token_keys") && $0.contains("kids=2026-11") })
        let first = try await Self.put(port: port, post: post, token: old.token(user: 1))
        #expect(first.status == 200, "\(first.status) \(first.text); the node: \(node.lastLines)")
        #expect(try await Self.put(port: port, post: post, token: new.token(user: 2)).text.contains("token_signature"))

        try Self.write([new], to: file)
        let deadline = ContinuousClock.now + .seconds(30)
        var taken = false
        while ContinuousClock.now < deadline {
            if try await Self.put(port: port, post: post, token: new.token(user: 2)).status == 200 {
                taken = true
                break
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(taken, "the rotated key was not taken: \(node.lastLines)")
        // The old key is gone: its tokens — also one the node had verified and remembered — are refused.
        let withdrawn = try await Self.put(port: port, post: post, token: old.token(user: 1))
        #expect(withdrawn.status == 401 && withdrawn.text.contains("token_signature"), "\(withdrawn.text)")
        #expect(node.output.contains { $0.contains("event=user_token_keys") && $0.contains("kids=2026-12") })

        // A file that breaks keeps the keys the node has, and says so.
        try Data("{".utf8).write(to: file)
        let warned = try await node.waitForOutput(timeout: .seconds(30)) { $0.contains { $0.contains("event=user_token_keys_failed") } }
        #expect(warned)
        #expect(try await Self.put(port: port, post: post, token: new.token(user: 3)).status == 200)

        node.kill(SIGTERM)
        #expect(try await node.waitForExit() == 0)
        await pool.close()
    }

    @Test("a node whose key set cannot be read does not start, and says why")
    func unreadableKeySet() async throws {
        let node = try ChildProcess(
            [
                ChildProcess.builtProduct("counter-node"), "serve", "--lease", "30s", "--listen", "127.0.0.1:0",
                "--postgres-url", TestEnvironment.postgresURL, "--redis-url", TestEnvironment.redisURL,
                "--user-token-jwks", "/nonexistent/jwks.json",
            ], mergingStandardError: true)
        #expect(try await node.waitForExit() == 1)
        #expect(node.output.contains { $0.contains("cannot start") && $0.contains("/nonexistent/jwks.json") }, "\(node.lastLines)")
        let short = try ChildProcess(
            [ChildProcess.builtProduct("counter-node"), "serve", "--lease", "30s", "--user-token-secret", "too-short"],
            mergingStandardError: true)
        #expect(try await short.waitForExit() == 2)
        #expect(short.output.contains { $0.contains("at least 32 bytes") }, "\(short.lastLines)")
    }

    @Test("one public key in PEM (Laravel Passport's oauth-public.key) serves as a key set")
    func pemKey() async throws {
        let file = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("counter-pem-\(UUID().uuidString.prefix(8)).key")
        defer { try? FileManager.default.removeItem(at: file) }
        let passport = TokenSigner(generating: .rs256, keyID: nil)
        try Data(passport.publicPEM.utf8).write(to: file)
        let (keys, _) = try await KeySetSource(location: file.path).load()
        let verifier = TokenVerifier(secret: nil, keySet: true, rules: ClaimRules())
        verifier.replaceKeys(keys)
        #expect(try verifier.user(of: Array(passport.token(user: 12).utf8)) == 12)
        let withKid = TokenSigner(generating: .rs256, keyID: "k1")
        #expect(throws: TokenRefusal.self) { try verifier.user(of: Array(withKid.token(user: 12).utf8)) }
        try Data("-----BEGIN PUBLIC KEY-----\nnonsense\n-----END PUBLIC KEY-----\n".utf8).write(to: file)
        await #expect(throws: (any Error).self) { try await KeySetSource(location: file.path).load() }
    }

    @Test("a key set from an http URL (the identity provider's JWKS endpoint)")
    func keySetFromURL() async throws {
        let folder = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("counter-jwks-url-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let signer = TokenSigner(generating: .es256, keyID: "url-key")
        try TokenSigner.keySet([signer]).write(to: folder.appendingPathComponent("jwks.json"))
        let port = try PrivateServers.freePort()
        let server = try ChildProcess(
            ["/usr/bin/python3", "-m", "http.server", String(port), "--bind", "127.0.0.1", "--directory", folder.path],
            mergingStandardError: true)
        defer {
            server.kill(SIGKILL)
            _ = waitpid(server.pid, nil, 0)
        }
        let source = KeySetSource(location: "http://127.0.0.1:\(port)/jwks.json")
        var loaded: [PublicKey] = []
        for _ in 0..<100 {
            if let (keys, _) = try? await source.load() {
                loaded = keys
                break
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(loaded.map(\.id) == ["url-key"])
        let verifier = TokenVerifier(secret: nil, keySet: true, rules: ClaimRules())
        verifier.replaceKeys(loaded)
        #expect(try verifier.user(of: Array(signer.token(user: 4).utf8)) == 4)
        await #expect(throws: (any Error).self) { try await KeySetSource(location: "http://127.0.0.1:\(port)/missing.json").load() }
    }
}
