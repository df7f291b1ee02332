/// Request bodies refuse members they do not know, so a misspelt option (`"repiar":true`) is an
/// error rather than silently ignored.
public struct UnknownMember: Error, Sendable, Equatable, CustomStringConvertible {
    /// The member's name.
    public let name: String

    public init(name: String) {
        self.name = name
    }

    public var description: String { "unknown member \"\(name)\"" }
}

extension KeyedDecodingContainer {
    /// The member's value, or `nil` when the member is absent. Unlike `decodeIfPresent`, an
    /// explicit `null` is refused (`valueNotFound`): a request body that says `"ids":null` means
    /// something, and it must not be read as "all".
    func decodeUnlessAbsent<Value: Decodable>(_ type: Value.Type, forKey key: Key) throws -> Value? {
        contains(key) ? try decode(type, forKey: key) : nil
    }
}

enum UnknownMembers {
    private struct AnyKey: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { return nil }
    }

    /// Throws `UnknownMember` for the first member of the decoded object not in `allowed`.
    static func refuse<Key: CodingKey>(in decoder: any Decoder, allowed: [Key]) throws {
        let names = Set(allowed.map(\.stringValue))
        let container = try decoder.container(keyedBy: AnyKey.self)
        if let unknown = container.allKeys.map(\.stringValue).sorted().first(where: { !names.contains($0) }) {
            throw UnknownMember(name: unknown)
        }
    }
}

/// A 64-bit integer member read so that a value of another kind (`1.5`, `"7"`, `1e20`) fails
/// with its place in the body; Foundation's decoder reports some of those as a body that is not
/// JSON at all.
struct WireInteger: Decodable {
    let value: Int64

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        do {
            value = try container.decode(Int64.self)
        } catch {
            throw DecodingError.typeMismatch(Int64.self, .init(codingPath: decoder.codingPath, debugDescription: "not a 64-bit integer"))
        }
    }
}
