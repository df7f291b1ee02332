/// A map that holds at most `capacity` entries and forgets the least recently used one first.
/// Pure; O(1) per operation (a dictionary of nodes in an array-backed doubly linked list).
struct LRUCache<Key: Hashable, Value> {
    private struct Node {
        var key: Key
        var value: Value
        var newer: Int?
        var older: Int?
    }

    /// Most entries kept.
    let capacity: Int
    private var nodes: [Node] = []
    private var index: [Key: Int] = [:]
    private var free: [Int] = []
    private var newest: Int?
    private var oldest: Int?

    init(capacity: Int) {
        precondition(capacity >= 1, "an LRU cache holds at least one entry")
        self.capacity = capacity
    }

    var count: Int { index.count }

    /// The value for `key`, marking it most recently used.
    mutating func get(_ key: Key) -> Value? {
        guard let slot = index[key] else { return nil }
        moveToFront(slot)
        return nodes[slot].value
    }

    /// The value for `key` without changing the order.
    func peek(_ key: Key) -> Value? {
        index[key].map { nodes[$0].value }
    }

    /// Stores `value` as the most recently used; returns the entry evicted to make room, if any.
    @discardableResult
    mutating func set(_ key: Key, _ value: Value) -> (key: Key, value: Value)? {
        if let slot = index[key] {
            nodes[slot].value = value
            moveToFront(slot)
            return nil
        }
        var evicted: (Key, Value)?
        if index.count == capacity, let last = oldest {
            evicted = (nodes[last].key, nodes[last].value)
            unlink(last)
            index[nodes[last].key] = nil
            free.append(last)
        }
        let node = Node(key: key, value: value, newer: nil, older: nil)
        let slot: Int
        if let reused = free.popLast() {
            nodes[reused] = node
            slot = reused
        } else {
            nodes.append(node)
            slot = nodes.count - 1
        }
        index[key] = slot
        linkAtFront(slot)
        return evicted
    }

    /// Forgets `key`.
    mutating func remove(_ key: Key) {
        guard let slot = index.removeValue(forKey: key) else { return }
        unlink(slot)
        free.append(slot)
    }

    /// Keys from most to least recently used.
    var keysByRecency: [Key] {
        var keys: [Key] = []
        var cursor = newest
        while let slot = cursor {
            keys.append(nodes[slot].key)
            cursor = nodes[slot].older
        }
        return keys
    }

    private mutating func moveToFront(_ slot: Int) {
        guard newest != slot else { return }
        unlink(slot)
        linkAtFront(slot)
    }

    private mutating func linkAtFront(_ slot: Int) {
        nodes[slot].newer = nil
        nodes[slot].older = newest
        if let first = newest { nodes[first].newer = slot }
        newest = slot
        if oldest == nil { oldest = slot }
    }

    private mutating func unlink(_ slot: Int) {
        let newer = nodes[slot].newer, older = nodes[slot].older
        if let newer { nodes[newer].older = older } else { newest = older }
        if let older { nodes[older].newer = newer } else { oldest = newer }
        nodes[slot].newer = nil
        nodes[slot].older = nil
    }
}
