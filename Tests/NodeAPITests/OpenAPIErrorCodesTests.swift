import Foundation
import Testing
@testable import NodeAPI

/// The error codes `docs/openapi.yaml` lists, held to `ErrorCode` (every code the node answers,
/// with its status).
@Suite("The OpenAPI document and the error codes")
struct OpenAPIErrorCodesTests {
    static var document: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(OpenAPIDocument.json))) as? [String: Any] ?? [:] }
    static var components: [String: Any] { document["components"] as? [String: Any] ?? [:] }

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
}
