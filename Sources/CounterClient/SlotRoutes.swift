import CounterWire
import Foundation
import ShardRouter
import Synchronization

/// The cluster's slot map as a slot-aware client last read it (`GET /v1/cluster`): which node to
/// send a post's requests to, so they reach the owner without a hop. Shared by copies of the
/// client; read again when a node answers `421` (the map moved on).
final class SlotRoutes: Sendable {
    private let map = Mutex<ClusterMapBody?>(nil)

    /// The owner's base URL for `post`, if the map names a live one.
    func owner(ofPost post: Int64) -> URL? {
        guard let url = map.withLock({ $0?.ownerURL(ofSlot: Int(HashSlot(post: post).rawValue)) }) else { return nil }
        return URL(string: url)
    }

    /// Whether a map has been read.
    var isKnown: Bool { map.withLock { $0 != nil } }

    /// Keeps `body` unless the map held is newer.
    func update(_ body: ClusterMapBody) {
        map.withLock { current in
            if current.map({ $0.version <= body.version }) ?? true { current = body }
        }
    }
}
