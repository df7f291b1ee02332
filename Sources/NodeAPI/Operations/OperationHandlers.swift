import CounterWire
import NodeHTTP

/// The handlers operators' tools call: liveness, readiness, metrics and the API's document.
enum OperationHandlers {
    /// `/healthz` and a ready `/readyz`, encoded once (probes and the bench's ceiling hit them).
    static let healthy = (try? WireEncoder.encode(HealthStatus(status: "ok"))) ?? []
    static let ready = (try? WireEncoder.encode(HealthStatus(status: "ready"))) ?? []

    /// `GET /healthz`: the process answers.
    static func health(_ api: CounterAPI, _ request: RouteRequest) -> HTTPResponse {
        HTTPResponse(status: 200, body: healthy)
    }

    /// `GET /openapi.json`.
    static func openAPI(_ api: CounterAPI, _ request: RouteRequest) -> HTTPResponse {
        HTTPResponse(status: 200, body: OpenAPIDocument.json)
    }

    /// `GET /readyz` (`ReadinessProbe`).
    static func readiness(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        await api.readiness.check()
    }

    /// `GET /metrics`: Prometheus's text format (`NodeMetrics`).
    static func metrics(_ api: CounterAPI, _ request: RouteRequest) async throws -> HTTPResponse {
        var text = ""
        await NodeMetrics.render(api, into: &text)
        return HTTPResponse(status: 200, contentType: "text/plain; version=0.0.4", body: Array(text.utf8))
    }
}
