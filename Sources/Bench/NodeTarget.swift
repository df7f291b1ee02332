import BenchKit

/// The node a bench mode talks to (`--url`, default `http://127.0.0.1:8080`) and its tokens
/// (`--api-token`, `--admin-token`; env `COUNTER_API_TOKEN`, `COUNTER_ADMIN_TOKEN`), with the
/// bookkeeping calls the modes make of it.
struct NodeTarget {
    var endpoint = Endpoint(host: "127.0.0.1", port: 8080)
    var apiToken: String?
    var adminToken: String?

    init(environment: [String: String]) {
        apiToken = environment["COUNTER_API_TOKEN"]
        adminToken = environment["COUNTER_ADMIN_TOKEN"]
    }

    /// Takes `flag` if it is one of the node's; returns whether it did.
    mutating func take(_ flag: String, from reader: inout BenchArguments) throws -> Bool {
        switch flag {
        case "--url":
            do {
                endpoint = try Endpoint(url: try reader.value(flag))
            } catch let error as Endpoint.Invalid {
                throw BenchUsageError(message: "--url \(error.message)")
            }
        case "--api-token": apiToken = try reader.value(flag)
        case "--admin-token": adminToken = try reader.value(flag)
        default: return false
        }
        return true
    }

    /// `POST /admin/flush`: returns once PostgreSQL has everything the node acknowledged.
    func flush() throws {
        let (status, body) = try OneShotHTTP.send(to: endpoint, method: "POST", path: "/admin/flush", token: adminToken)
        guard status == 200 else { throw BenchCheckFailure(message: "POST /admin/flush on \(endpoint) answered \(status): \(body)") }
    }

    /// The node's resident memory (`process_resident_memory_bytes` of `/metrics`).
    func residentBytes() throws -> Int {
        let (status, body) = try OneShotHTTP.send(to: endpoint, method: "GET", path: "/metrics", token: apiToken, timeoutSeconds: 10)
        guard status == 200, let line = body.split(separator: "\n").first(where: { $0.hasPrefix("process_resident_memory_bytes ") }),
            let value = Double(line.dropFirst("process_resident_memory_bytes ".count))
        else {
            throw BenchCheckFailure(message: "GET /metrics on \(endpoint) did not give process_resident_memory_bytes")
        }
        return Int(value)
    }
}
