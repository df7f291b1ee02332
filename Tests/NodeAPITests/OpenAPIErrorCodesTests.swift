import Foundation
import Testing

@testable import NodeAPI

/// The error codes `docs/openapi.yaml` lists, held to `ErrorCode` (every code the node answers,
/// with its status) and to what each route of `APIRoutes` may answer (`RequestChain.codes`).
@Suite("The OpenAPI document and the error codes")
struct OpenAPIErrorCodesTests {
    static var document: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(OpenAPIDocument.json))) as? [String: Any] ?? [:] }
    static var components: [String: Any] { document["components"] as? [String: Any] ?? [:] }

    /// The response components by name (`BadRequest`, …) and the codes each names in backticks.
    static var namedCodes: [String: Set<String>] {
        let responses = components["responses"] as? [String: [String: Any]] ?? [:]
        return responses.mapValues { response in
            let description = response["description"] as? String ?? ""
            let parts = description.split(separator: "`", omittingEmptySubsequences: false)
            return Set(parts.enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) })
        }
    }

    /// An operation's responses: status → the component it refers to (`nil` when written inline).
    static func responses(_ path: String, _ method: HTTPMethod) -> [Int: String?]? {
        let paths = document["paths"] as? [String: [String: Any]] ?? [:]
        guard let operation = paths[path]?[method.rawValue.lowercased()] as? [String: Any],
            let responses = operation["responses"] as? [String: [String: Any]]
        else { return nil }
        var byStatus: [Int: String?] = [:]
        for (status, response) in responses {
            guard let status = Int(status) else { continue }
            byStatus[status] = (response["$ref"] as? String).map { String($0.split(separator: "/").last ?? "") }
        }
        return byStatus
    }

    @Test("the document's error codes are exactly the codes the node answers")
    func codesAreTheNodes() throws {
        let schemas = try #require(Self.components["schemas"] as? [String: Any])
        let error = try #require(schemas["Error"] as? [String: Any])
        let inner = try #require((error["properties"] as? [String: Any])?["error"] as? [String: Any])
        let code = try #require((inner["properties"] as? [String: Any])?["code"] as? [String: Any])
        let listed = try #require(code["enum"] as? [String])
        #expect(Set(listed) == Set(ErrorCode.allCases.map(\.rawValue)))
        #expect(listed.count == Set(listed).count, "listed twice")
    }

    @Test("each operation lists the status of every code its route may answer, and the response there names the code")
    func everyAnsweredCodeIsDocumented() throws {
        let named = Self.namedCodes
        for route in APIRoutes.table.routes {
            for method in route.methods {
                let responses = try #require(Self.responses(route.label, method), "\(method.rawValue) \(route.label)")
                let codes = RequestChain.codes(of: route, method: method).subtracting(ErrorCode.transport).subtracting([.internal])
                for code in codes {
                    guard let component = responses[code.status] else {
                        Issue.record(
                            "\(method.rawValue) \(route.label) answers \(code.status) \(code.rawValue); the document lists no \(code.status)")
                        continue
                    }
                    #expect(
                        component.map { named[$0]?.contains(code.rawValue) == true } == true,
                        "\(method.rawValue) \(route.label): the \(code.status) answer (\(component ?? "inline")) does not name \(code.rawValue)")
                }
                // And nothing the route never answers: 200, the library's 414, and the
                // transport's own refusals (which any request may meet) aside.
                let answerable = Set(codes.map(\.status)).union(ErrorCode.transport.map(\.status)).union([200, 414])
                for status in responses.keys where !answerable.contains(status) {
                    Issue.record("\(method.rawValue) \(route.label): the document lists \(status), which the route never answers")
                }
            }
        }
    }

    @Test("a response names only codes of the status it is given under, and every code is named somewhere")
    func namedCodesHaveTheirStatus() throws {
        let named = Self.namedCodes
        let known = Dictionary(uniqueKeysWithValues: ErrorCode.allCases.map { ($0.rawValue, $0) })
        var seen: Set<ErrorCode> = []
        for route in APIRoutes.table.routes {
            for method in route.methods {
                for (status, component) in try #require(Self.responses(route.label, method)) {
                    guard let component else { continue }
                    for text in named[component] ?? [] {
                        guard let code = known[text] else { continue }
                        seen.insert(code)
                        #expect(
                            code.status == status,
                            "\(component), given for \(status) on \(method.rawValue) \(route.label), names \(text) (\(code.status))")
                    }
                }
            }
        }
        #expect(ErrorCode.allCases.filter { !seen.contains($0) && $0 != .internal } == [], "codes no response names")
    }
}
