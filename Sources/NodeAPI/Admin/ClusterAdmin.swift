import CounterWire
import NodeCluster
import NodeHTTP
import Persistence
import ShardRouter

/// The operator calls on the whole cluster (`/admin/cluster/…`): the node asked sends the
/// matching one-node call to every live node of the slot map — this one in process, the others
/// over HTTP with the caller's admin token — and merges their answers (`ClusterAdminMerge`).
/// A node that does not answer is named in the answer, which is then not `complete`; so is a
/// slot no live node owns (its changes wait in its log for the takeover that drains it).
///
/// Flush and stats go to every node. Reconcile and dead-letter replay go, post by post, to the
/// owner of the post's slot: only it knows what waits in Redis for the post, and only it may
/// write for it. A node that is the only writer (not clustered) is a cluster of one.
struct ClusterAdmin: Sendable {
    /// A node to ask.
    struct Target: Sendable, Equatable {
        let id: String
        let url: String
        /// This node: asked in process.
        let isSelf: Bool
    }

    let member: ClusterMember?
    /// Connections to the other nodes: `quick` for calls that answer at once, `patient` for a
    /// flush that waits for PostgreSQL.
    let peers: (quick: PeerClient, patient: PeerClient)?
    /// Pages of all posts, for a reconcile that names none.
    let records: PostRecords
    let deadLetters: DeadLetters
    /// Runs a one-node admin route on this node, as a request to it would.
    let here: @Sendable (HTTPRequest) async -> HTTPResponse

    // MARK: - The calls

    /// `POST /admin/cluster/flush[?wait=false]`.
    func flush(wait: Bool, authorization: String?) async -> ClusterFlushResult {
        let nodes = await liveNodes()
        let request = HTTPRequest(
            method: "POST", path: "/admin/flush", query: wait ? [:] : ["wait": "false"],
            rawQuery: wait ? "" : "wait=false", authorization: authorization)
        let answers = await ask(nodes, FlushResult.self, patiently: wait) { _ in request }
        // Read after the flushes: a slot taken over meanwhile was drained by its new owner.
        return ClusterAdminMerge.flush(wait: wait, answers, unserved: await unservedSlots())
    }

    /// `GET /admin/cluster/stats`.
    func statistics(authorization: String?) async -> ClusterStatistics {
        let nodes = await liveNodes()
        let request = HTTPRequest(method: "GET", path: "/admin/stats", authorization: authorization)
        let answers = await ask(nodes, ServiceStatistics.self) { _ in request }
        return ClusterAdminMerge.statistics(answers, unserved: await unservedSlots())
    }

    /// `POST /admin/cluster/reconcile`: `request` checked as the one-node call checks it.
    func reconcile(_ request: ReconcileRequest, authorization: String?) async throws -> ClusterReconcileReport {
        let nodes = await liveNodes()
        let limit = request.limit ?? 1_000
        let posts: [Int64]
        var nextAfter: Int64?
        if let asked = request.postIDs {
            posts = asked
        } else {
            posts = try await records.postIDs(after: request.after ?? 0, limit: limit)
            if posts.count == limit { nextAfter = posts.last }
        }
        let (byOwner, unowned) = group(posts, of: nodes) { $0 }
        let repair = request.repair ?? false
        let answers = await ask(nodes, ReconcileReport.self) { node in
            guard let part = byOwner[node.id], !part.isEmpty,
                let body = try? WireEncoder.encode(ReconcileRequest(postIDs: part, repair: repair))
            else { return nil }
            return HTTPRequest(method: "POST", path: "/admin/reconcile", authorization: authorization, body: body)
        }
        return ClusterAdminMerge.reconcile(answers, asked: byOwner, unowned: unowned, nextAfter: nextAfter, unserved: await unservedSlots())
    }

    /// `POST /admin/cluster/dead-letters/replay`: the letters `ids` (all when `nil`).
    func replay(ids: [LetterID]?, authorization: String?) async throws -> ClusterReplayResult {
        let nodes = await liveNodes()
        let letters = try await deadLetters.list(count: 10_000).filter { ids == nil || ids!.contains($0.id) }
        // A letter without a change has no owner: this node replays it (and says why it fails).
        let selfID = nodes.first { $0.isSelf }?.id ?? ""
        let (byOwner, unowned) = group(letters, of: nodes) { $0.change?.postID }
        let answers = await ask(nodes, ReplayResult.self) { node in
            let part = (byOwner[node.id] ?? []) + (node.id == selfID ? letters.filter { $0.change == nil } : [])
            guard !part.isEmpty, let body = try? WireEncoder.encode(DeadLetterSelection(ids: part.map(\.id.description))) else { return nil }
            return HTTPRequest(method: "POST", path: "/admin/dead-letters/replay", authorization: authorization, body: body)
        }
        return ClusterAdminMerge.replay(
            answers, asked: byOwner.mapValues { $0.map(\.id.description) },
            unowned: unowned.map(\.id.description), unserved: await unservedSlots())
    }

    // MARK: - The nodes

    /// The live nodes of a freshly read map, this one first; just this one when not clustered.
    private func liveNodes() async -> [Target] {
        guard let member else { return [Target(id: "this node", url: "", isSelf: true)] }
        try? await member.refreshMap()
        let me = member.configuration.nodeID
        let live = member.map.nodes.filter(\.isLive)
        let others = live.filter { $0.id != me }.map { Target(id: $0.id, url: $0.advertiseURL, isSelf: false) }
        let selfURL = live.first { $0.id == me }?.advertiseURL ?? member.configuration.advertiseURL
        return [Target(id: me, url: selfURL, isSelf: true)] + others
    }

    /// The slots no live node owns in the map as read now, as ranges.
    private func unservedSlots() async -> [ClosedRange<Int>] {
        guard let member else { return [] }
        try? await member.refreshMapUnlessFresh()
        let map = member.map
        var unserved = SlotSet()
        for slot in 0..<HashSlot.count where map.owner(of: UInt16(slot)) == nil { unserved.insert(slot) }
        return unserved.ranges
    }

    /// `items` by the id of the live node that owns their post's slot (this node when not
    /// clustered); those whose slot has no live owner (or no post) apart.
    private func group<Item>(_ items: [Item], of nodes: [Target], post: (Item) -> Int64?) -> (byOwner: [String: [Item]], unowned: [Item]) {
        var byOwner: [String: [Item]] = [:]
        var unowned: [Item] = []
        let known = Set(nodes.map(\.id))
        for item in items {
            guard let postID = post(item) else { continue }
            let owner: String? = if let member { member.map.owner(of: HashSlot(post: postID).rawValue)?.id } else { nodes.first?.id }
            if let owner, known.contains(owner) { byOwner[owner, default: []].append(item) } else { unowned.append(item) }
        }
        return (byOwner, unowned)
    }

    /// Each node's answer to its request (nodes given none are left out), decoded.
    private func ask<Answer: Sendable & Equatable & Codable>(
        _ nodes: [Target], _ answer: Answer.Type, patiently: Bool = false,
        request: (Target) -> HTTPRequest?
    ) async -> [ClusterNodeAnswer<Answer>] {
        let asked = nodes.compactMap { node in request(node).map { (node, $0) } }
        return await withTaskGroup(of: (Int, ClusterNodeAnswer<Answer>).self) { group in
            for (index, (node, request)) in asked.enumerated() {
                group.addTask { (index, await self.answer(of: node, to: request, patiently: patiently, as: Answer.self)) }
            }
            var answers: [(Int, ClusterNodeAnswer<Answer>)] = []
            for await answer in group { answers.append(answer) }
            return answers.sorted { $0.0 < $1.0 }.map(\.1)
        }
    }

    private func answer<Answer: Sendable & Equatable & Codable>(
        of node: Target, to request: HTTPRequest, patiently: Bool,
        as _: Answer.Type
    ) async -> ClusterNodeAnswer<Answer> {
        let response: HTTPResponse
        if node.isSelf {
            response = await here(request)
        } else {
            guard let peers else { return ClusterNodeAnswer(nodeID: node.id, url: node.url, answer: nil, error: "no connections to other nodes") }
            var headers: [(name: String, value: String)] = []
            if let authorization = request.authorization { headers.append(("Authorization", authorization)) }
            if !request.body.isEmpty { headers.append(("Content-Type", "application/json")) }
            let target = request.path + (request.rawQuery.isEmpty ? "" : "?" + request.rawQuery)
            let client = patiently ? peers.patient : peers.quick
            switch await client.send(PeerClient.Request(method: request.method, target: target, headers: headers, body: request.body), to: node.url) {
            case .answered(let answer):
                response = HTTPResponse(status: answer.status, body: answer.body)
            case .notSent(let why):
                return ClusterNodeAnswer(nodeID: node.id, url: node.url, answer: nil, error: "not reached: \(why)")
            case .broken(let why):
                return ClusterNodeAnswer(nodeID: node.id, url: node.url, answer: nil, error: "no answer: \(why)")
            }
        }
        guard response.status == 200 else {
            let detail =
                (try? WireDecoder.decode(ErrorBody.self, from: response.body)).map { "\($0.error.code): \($0.error.message)" }
                ?? String(decoding: response.body.prefix(300), as: UTF8.self)
            return ClusterNodeAnswer(nodeID: node.id, url: node.url, answer: nil, error: "answered \(response.status) \(detail)")
        }
        do {
            return ClusterNodeAnswer(nodeID: node.id, url: node.url, answer: try WireDecoder.decode(Answer.self, from: response.body), error: nil)
        } catch {
            return ClusterNodeAnswer(
                nodeID: node.id, url: node.url, answer: nil, error: "an answer that is not \(Answer.self): \(WireDecoder.describe(error))")
        }
    }
}
