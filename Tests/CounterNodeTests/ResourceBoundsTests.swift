import Foundation
import TestSupport
import Testing

/// What hostile or careless clients can make a node hold is bounded: posts remembered as not
/// existing, queued operations, connections and what each holds. Runs on its own (`scripts/test`
/// gives it an invocation of its own): it holds most of the file descriptors a process may open.
@Suite("Resource bounds under hostile clients", .serialized)
struct ResourceBoundsTests {
    /// Resident memory of process `pid`, in bytes.
    static func residentBytes(_ pid: pid_t) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        return fields.count > 1 ? (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE))) : 0
    }

    /// Open descriptors of process `pid`.
    static func openDescriptors(_ pid: pid_t) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? 0
    }

    /// Opens `count` connections on a thread of its own (never on the cooperative pool), sending
    /// `greeting` on each; returns their descriptors.
    static func openConnections(_ count: Int, port: Int, greeting: [UInt8]) async -> [Int32] {
        await withCheckedContinuation { continuation in
            Thread {
                var descriptors: [Int32] = []
                descriptors.reserveCapacity(count)
                for _ in 0..<count {
                    guard let descriptor = try? RawHTTPClient.connectedSocket(port: port) else { break }
                    if !greeting.isEmpty { _ = greeting.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
                    descriptors.append(descriptor)
                }
                continuation.resume(returning: descriptors)
            }.start()
        }
    }

    /// The descriptors this process (and the node it starts) may open: the soft limit raised to
    /// the hard one.
    static func descriptorLimit() -> Int {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        return Int(clamping: limit.rlim_cur)
    }

    @Test(
        "1,000,000 distinct unknown post ids, 18,000 idle connections and 500 slow-header clients: the node's memory stays bounded (printed) and other clients keep getting answers"
    )
    func hostileClients() async throws {
        // Both ends of every connection are on this machine: this process holds one, the node the
        // other, each under the same limit (20,000 here, and no more may be set).
        let idleCount = min(18_000, Self.descriptorLimit() - 2_000)
        try #require(idleCount >= 5_000, "this machine lets a process open \(Self.descriptorLimit()) descriptors; the test needs 7,000 at least")
        let pool = try await TestEnvironment.migratedPool()
        let post = try await TestEnvironment.createPosts(1, in: pool)[0]
        let prefix = TestEnvironment.uniqueKeyPrefix("bounds").replacingOccurrences(of: ":", with: "-")
        let port = try PrivateServers.freePort()
        // Connections: the idle and slow ones below, the others, and room to spare under the
        // 20,000 descriptors a process may hold here.
        let node = try ChildProcess([
            ChildProcess.builtProduct("counter-node"), "serve", "--listen", "127.0.0.1:\(port)",
            "--postgres-url", TestEnvironment.postgresURL, "--redis-url", TestEnvironment.redisURL,
            "--key-prefix", prefix, "--max-connections", String(idleCount + 1_000), "--idle-timeout", "300", "--log-level", "warn",
        ])
        try #require(try await node.waitUntilListening(), "\(node.lastLines)")
        for user in 1...200 {
            #expect(
                try await RawHTTPClient.exchange(
                    port: port, chunks: [RawHTTPClient.request("POST", "/v1/posts/\(post)/likes/\(user)/toggle")],
                    responses: 1
                ).first?.status == 200)
        }
        let baseline = Self.residentBytes(node.pid)

        // 1,000,000 distinct post ids that do not exist, 1,000 per feed query, 8 clients at once.
        let base = Int64.random(in: 5_000_000_000_000...6_000_000_000_000)
        let answered = try await withThrowingTaskGroup(of: Int.self) { group in
            for client in 0..<8 {
                group.addTask {
                    var ok = 0
                    for query in stride(from: client, to: 1_000, by: 8) {
                        let ids = (0..<1_000).map { String(base + Int64(query * 1_000 + $0)) }.joined(separator: ",")
                        let body = #"{"post_ids":[\#(ids)],"user_id":7}"#
                        let response = try await RawHTTPClient.exchange(
                            port: port, chunks: [RawHTTPClient.request("POST", "/v1/posts/query", body: body)],
                            responses: 1, timeout: .seconds(60))
                        if response.first?.status == 200 && response.first?.text == #"{"posts":[]}"# { ok += 1 }
                    }
                    return ok
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(answered == 1_000)
        let afterUnknown = Self.residentBytes(node.pid)

        // 18,000 connections that never send a byte, and 500 that stop in the middle of their headers.
        let idle = await Self.openConnections(idleCount, port: port, greeting: [])
        let slow = await Self.openConnections(500, port: port, greeting: Array("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: aaaa".utf8))
        defer { for descriptor in idle + slow { close(descriptor) } }
        #expect(idle.count == idleCount && slow.count == 500)
        // The node holds them all (let it accept the last ones first).
        var held = 0
        for _ in 0..<100 {
            held = Self.openDescriptors(node.pid)
            if held >= idleCount + 500 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(held >= idleCount + 500, "the node holds \(held) descriptors")
        // Other clients are answered meanwhile: new connections, and one kept alive.
        var others = 0
        for user in 201...300 {
            let response = try await RawHTTPClient.exchange(
                port: port, chunks: [RawHTTPClient.request("POST", "/v1/posts/\(post)/likes/\(user)/toggle")], responses: 1)
            if response.first?.status == 200 { others += 1 }
        }
        let keptAlive = try await RawHTTPClient.exchange(
            port: port, chunks: (1...50).map { _ in RawHTTPClient.request("GET", "/v1/posts/\(post)") }, responses: 50)
        #expect(others == 100)
        #expect(keptAlive.count == 50 && keptAlive.allSatisfy { $0.status == 200 && $0.text.contains(#""likes_count":300"#) })
        let withConnections = Self.residentBytes(node.pid)

        let mib = { (bytes: Int) in String(format: "%.1f MiB", Double(bytes) / 1_048_576) }
        print(
            "resource bounds: node RSS \(mib(baseline)) at start; \(mib(afterUnknown)) after 1,000,000 unknown post ids; "
                + "\(mib(withConnections)) holding \(held) descriptors (\(idleCount) idle, 500 slow-header connections); "
                + "per held connection \(String(format: "%.1f", Double(withConnections - afterUnknown) / Double(idleCount + 500) / 1_024)) KiB")
        // The unknown ids leave at most 10,000 remembered per shard: a few MiB, not a million entries.
        #expect(afterUnknown - baseline < 64 << 20)
        // A held connection costs the library's buffer for it at most (10 KiB), not more.
        #expect(withConnections - afterUnknown < (idleCount + 500) * 12 * 1_024)

        for descriptor in idle + slow { shutdown(descriptor, Int32(SHUT_RDWR)) }
        node.kill(SIGTERM)
        #expect(try await node.waitForExit(timeout: .seconds(60)) == 0)
        await pool.close()
    }
}
