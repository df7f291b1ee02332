/// Encodes the wire types as compact JSON whose members come in the order the type encodes
/// them, with `null` for every absent optional of an answer (request bodies leave absent
/// members out by encoding themselves) — the same bytes on every run.
///
/// Foundation's `JSONEncoder` on Linux orders members differently in every process (or
/// alphabetically with `.sortedKeys`), which would make the node's answers differ from run to
/// run and from the hand-written encoders of the hot answers. The text itself comes from
/// `JSONWriter`, the writer those use, so both produce exactly the same bytes.
public enum WireEncoder {
    /// `value` as compact JSON.
    public static func encode<Value: Encodable>(_ value: Value) throws -> [UInt8] {
        let root = Node()
        try value.encode(to: NodeEncoder(node: root, codingPath: []))
        var writer = JSONWriter(capacity: 256)
        root.write(into: &writer)
        return writer.bytes
    }

    /// `value` as compact JSON text.
    public static func text<Value: Encodable>(_ value: Value) throws -> String {
        String(decoding: try encode(value), as: UTF8.self)
    }
}

/// One JSON value being built: a class, so containers can fill their children after handing
/// them out.
private final class Node {
    enum Content {
        case empty
        case null
        case bool(Bool)
        case integer(Int64)
        case unsigned(UInt64)
        case double(Double)
        case string(String)
        case object([(String, Node)])
        case array([Node])
    }

    var content: Content = .empty

    func member(_ key: String) -> Node {
        let child = Node()
        if case .object(var members) = content {
            content = .empty // keeps the array uniquely referenced while it grows
            members.append((key, child))
            content = .object(members)
        } else {
            content = .object([(key, child)])
        }
        return child
    }

    func element() -> Node {
        let child = Node()
        if case .array(var elements) = content {
            content = .empty
            elements.append(child)
            content = .array(elements)
        } else {
            content = .array([child])
        }
        return child
    }

    func write(into writer: inout JSONWriter) {
        switch content {
        case .empty, .null: writer.nullValue()
        case .bool(let value): writer.value(value)
        case .integer(let value): writer.value(value)
        case .unsigned(let value): writer.value(value)
        case .double(let value): writer.value(value)
        case .string(let value): writer.value(value)
        case .object(let members):
            writer.objectStart()
            for (key, node) in members {
                writer.key(key)
                node.write(into: &writer)
            }
            writer.objectEnd()
        case .array(let elements):
            writer.arrayStart()
            for node in elements { node.write(into: &writer) }
            writer.arrayEnd()
        }
    }
}

private struct NodeEncoder: Encoder {
    let node: Node
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if case .object = node.content {} else { node.content = .object([]) }
        return KeyedEncodingContainer(KeyedNodeContainer<Key>(node: node, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if case .array = node.content {} else { node.content = .array([]) }
        return UnkeyedNodeContainer(node: node, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleNodeContainer(node: node, codingPath: codingPath)
    }
}

/// Sets a node to a value of any `Encodable` type, primitives directly.
private func assign<Value: Encodable>(_ value: Value, to node: Node, codingPath: [any CodingKey]) throws {
    switch value {
    case let value as Bool: node.content = .bool(value)
    case let value as String: node.content = .string(value)
    case let value as Int64: node.content = .integer(value)
    case let value as Int: node.content = .integer(Int64(value))
    case let value as Int32: node.content = .integer(Int64(value))
    case let value as Int16: node.content = .integer(Int64(value))
    case let value as Int8: node.content = .integer(Int64(value))
    case let value as UInt64: node.content = .unsigned(value)
    case let value as UInt: node.content = .unsigned(UInt64(value))
    case let value as UInt32: node.content = .unsigned(UInt64(value))
    case let value as UInt16: node.content = .unsigned(UInt64(value))
    case let value as UInt8: node.content = .unsigned(UInt64(value))
    case let value as Double: node.content = .double(value)
    case let value as Float: node.content = .double(Double(value))
    default: try value.encode(to: NodeEncoder(node: node, codingPath: codingPath))
    }
}

private struct KeyedNodeContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let node: Node
    let codingPath: [any CodingKey]

    mutating func encodeNil(forKey key: Key) throws { node.member(key.stringValue).content = .null }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try assign(value, to: node.member(key.stringValue), codingPath: codingPath + [key])
    }
    // Absent optionals are written as `null`, not left out: every member is always there.
    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws { try encodeIfPresent(value as Bool?, key) }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws { try encodeIfPresent(value as String?, key) }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws { try encodeIfPresent(value as Double?, key) }
    mutating func encodeIfPresent(_ value: Float?, forKey key: Key) throws { try encodeIfPresent(value as Float?, key) }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws { try encodeIfPresent(value as Int?, key) }
    mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) throws { try encodeIfPresent(value as Int8?, key) }
    mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) throws { try encodeIfPresent(value as Int16?, key) }
    mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws { try encodeIfPresent(value as Int32?, key) }
    mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws { try encodeIfPresent(value as Int64?, key) }
    mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws { try encodeIfPresent(value as UInt?, key) }
    mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws { try encodeIfPresent(value as UInt8?, key) }
    mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws { try encodeIfPresent(value as UInt16?, key) }
    mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws { try encodeIfPresent(value as UInt32?, key) }
    mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws { try encodeIfPresent(value as UInt64?, key) }

    private mutating func encodeIfPresent<T: Encodable>(_ value: T?, _ key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let child = node.member(key.stringValue)
        child.content = .object([])
        return KeyedEncodingContainer(KeyedNodeContainer<NestedKey>(node: child, codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let child = node.member(key.stringValue)
        child.content = .array([])
        return UnkeyedNodeContainer(node: child, codingPath: codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder { NodeEncoder(node: node.member("super"), codingPath: codingPath) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { NodeEncoder(node: node.member(key.stringValue), codingPath: codingPath + [key]) }
}

private struct UnkeyedNodeContainer: UnkeyedEncodingContainer {
    let node: Node
    let codingPath: [any CodingKey]
    var count: Int {
        if case .array(let elements) = node.content { return elements.count }
        return 0
    }

    mutating func encodeNil() throws { node.element().content = .null }
    mutating func encode<T: Encodable>(_ value: T) throws { try assign(value, to: node.element(), codingPath: codingPath) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let child = node.element()
        child.content = .object([])
        return KeyedEncodingContainer(KeyedNodeContainer<NestedKey>(node: child, codingPath: codingPath))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let child = node.element()
        child.content = .array([])
        return UnkeyedNodeContainer(node: child, codingPath: codingPath)
    }

    mutating func superEncoder() -> any Encoder { NodeEncoder(node: node.element(), codingPath: codingPath) }
}

private struct SingleNodeContainer: SingleValueEncodingContainer {
    let node: Node
    let codingPath: [any CodingKey]

    mutating func encodeNil() throws { node.content = .null }
    mutating func encode<T: Encodable>(_ value: T) throws { try assign(value, to: node, codingPath: codingPath) }
}
