import CounterCore
import NodeHTTP
import WritePath

/// The middleware around every handler of `APIRoutes`, in this order:
///
/// 1. metrics (`HTTPMetrics`): outermost, so every answer is counted under its route's label and
///    status and timed from the moment the request was complete — refusals included;
/// 2. admission (`Admission`): the route, the caller's token (`Authentication`), the ids, the
///    method — on the HTTP thread, before anything waits;
/// 3. the user's write limit (`UserWriteLimit`): after admission, as it needs the caller, and
///    before anything runs, so a refused write touches nothing;
/// 4. forwarding to the slot's owner (`SlotForwarding`): around the handler, as only the handler
///    learns from the write path that the slot is not served here;
/// 5. the handler's errors as answers (`ErrorAnswers`).
///
/// A like route's handler is handed straight to the write path from the HTTP thread with a
/// completion that builds the answer (no task per request); only a slot served elsewhere takes
/// a task, to forward. Every other handler but the instant ones runs as a request task.
final class RequestChain: Sendable {
    let metrics = HTTPMetrics()
    let admission: Admission
    let writeLimit: UserWriteLimit
    let forwarding: SlotForwarding
    let errors: ErrorAnswers
    let service: CounterService
    /// The requests that wait for more than the write path's answer, run as children of the API's service.
    let tasks: RequestTasks

    init(
        admission: Admission, writeLimit: UserWriteLimit, forwarding: SlotForwarding, errors: ErrorAnswers, service: CounterService,
        tasks: RequestTasks
    ) {
        self.admission = admission
        self.writeLimit = writeLimit
        self.forwarding = forwarding
        self.errors = errors
        self.service = service
        self.tasks = tasks
    }

    /// Routes once and answers: refusals and instant routes at once, like routes from the write
    /// path's completion, the rest from a request task.
    func dispatch(_ request: HTTPRequest, api: CounterAPI) -> HTTPDisposition {
        let started = ContinuousClock.now
        metrics.count(request.httpProtocol)
        let match = APIRoutes.table.match(request.path)
        let method = HTTPMethod(rawValue: request.method)
        let routed: RouteRequest
        switch admission.admit(match, request, method: method) {
        case .answer(let response):
            metrics.record(match.label, response, since: started)
            return .respond(response)
        case .proceed(let admitted):
            routed = admitted
        }
        if let refusal = writeLimit.refusal(routed, method: method) {
            metrics.record(routed.route.label, refusal, since: started)
            return .respond(refusal)
        }
        switch routed.route.handler {
        case .instant(let handler):
            let response = handler(api, routed)
            metrics.record(routed.route.label, response, since: started)
            return .respond(response)
        case .like(let like):
            return submit(like, routed, method: method, since: started)
        case .task(let handler):
            return .later { respond in
                self.later(respond) {
                    let response = await self.forwarding.around(routed) { try await handler(api, $0) }
                    self.metrics.record(routed.route.label, response, since: started)
                    return response
                }
            }
        }
    }

    /// The hot path: the operation goes into the shard's queue from the HTTP thread, and the
    /// shard's completion answers. A slot served elsewhere is forwarded from a request task.
    private func submit(_ like: LikeRoute, _ request: RouteRequest, method: HTTPMethod?, since started: ContinuousClock.Instant) -> HTTPDisposition {
        guard let user = LikeRoute.user(of: request) else {
            // The middleware lets no caller but a user onto a route without a user in its path.
            let response = HTTPResponse.error(.internal, message: "route \(request.route.label) has no user")
            metrics.record(request.route.label, response, since: started)
            return .respond(response)
        }
        let operation = like.operation(for: method)
        return .later { respond in
            self.service.submit(operation, post: request.ids.post, user: user, kind: LikeRoute.kind(of: request)) { result in
                let response: HTTPResponse
                switch result {
                case .success(let state): response = like.response(state)
                case .failure(let error as CounterError) where error.code == .notOwner && self.forwarding.isOn:
                    self.later(respond) {
                        let service = self.service
                        let response = await self.forwarding.elsewhere(request) { try await like.perform(service, $0) }
                        self.metrics.record(request.route.label, response, since: started)
                        return response
                    }
                    return
                case .failure(let error): response = self.errors.answer(error, route: request.route.label)
                }
                self.metrics.record(request.route.label, response, since: started)
                respond(response)
            }
        }
    }

    /// Runs `work` as one of the API's request tasks and answers with what it returns (503
    /// once the API has stopped).
    func later(_ respond: @escaping @Sendable (HTTPResponse) -> Void, _ work: @escaping @Sendable () async -> HTTPResponse) {
        let started = tasks.start { respond(await work()) }
        if !started { respond(ErrorAnswers.refusal(.shuttingDown)) }
    }

    /// `request` answered in this process by its route's handler, as the service calling (the
    /// one-node admin calls a cluster-wide call makes of this node): no token, no metrics.
    func answerInProcess(_ request: HTTPRequest, api: CounterAPI) async -> HTTPResponse {
        guard case .found(let route, let ids) = APIRoutes.table.match(request.path), case .task(let handler) = route.handler else {
            return .error(.internal, message: "route \(request.path) is not answered in process")
        }
        return await forwarding.around(RouteRequest(http: request, route: route, ids: ids, caller: .service)) { try await handler(api, $0) }
    }

    /// Every code a request on `route` with `method` may be answered with: the handler's and the
    /// middleware's (the transport's own refusals, `ErrorCode.transport`, aside). What
    /// `docs/openapi.yaml` must list for the operation (`OpenAPIDocumentTests`).
    static func codes(of route: Route, method: HTTPMethod) -> Set<ErrorCode> {
        Admission.codes(of: route).union(UserWriteLimit.codes(of: route, method: method)).union(SlotForwarding.codes(of: route))
            .union(route.errors)
    }
}
