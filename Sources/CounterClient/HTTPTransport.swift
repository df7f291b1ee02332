import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Sends one HTTP request and returns the answer. `URLSessionTransport` is the real one; tests of
/// pure client logic may put a fake in its place.
public protocol HTTPTransport: Sendable {
    /// Sends `request`; throws `CounterClientError.connection` or `.timedOut` when no answer
    /// comes back.
    func send(_ request: URLRequest) async throws(CounterClientError) -> (Data, HTTPURLResponse)
}

/// `HTTPTransport` on Foundation's `URLSession` (FoundationNetworking on Linux).
public struct URLSessionTransport: HTTPTransport {
    public let session: URLSession

    public init(session: URLSession = .shared) {
        self.session = session
    }

    public func send(_ request: URLRequest) async throws(CounterClientError) -> (Data, HTTPURLResponse) {
        // A data task with a completion handler, not `session.data(for:)`: cancelling that one
        // (as the client's deadline does) runs URLSessionTask.cancel() inside the Swift task's
        // cancellation, which waits on the session's queue while holding the task's status
        // lock — and if the session's queue is just then finishing the same request, it waits
        // for that lock to resume the task: a deadlock of both threads, seen on Linux. Here the
        // cancel is sent on from another thread and the cancellation returns at once.
        let pending = PendingDataTask()
        let outcome: Result<(Data, URLResponse), any Error> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                pending.start(
                    session.dataTask(with: request) { data, response, error in
                        if let error {
                            continuation.resume(returning: .failure(error))
                        } else if let response {
                            continuation.resume(returning: .success((data ?? Data(), response)))
                        } else {
                            continuation.resume(returning: .failure(URLError(.badServerResponse)))
                        }
                    })
            }
        } onCancel: {
            pending.cancel()
        }
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try outcome.get()
        } catch let error as URLError {
            throw Self.failure(error, timeout: request.timeoutInterval)
        } catch {
            throw .connection(message: "\(error)", requestMayHaveSucceeded: true)
        }
        guard let http = response as? HTTPURLResponse else {
            throw .invalidResponse("not an HTTP response")
        }
        return (data, http)
    }

    /// What a `URLError` means for the caller: could the request have reached the service?
    static func failure(_ error: URLError, timeout: TimeInterval) -> CounterClientError {
        switch error.code {
        case .timedOut:
            return .timedOut(seconds: timeout)
        case .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .notConnectedToInternet, .badURL, .unsupportedURL:
            return .connection(message: error.localizedDescription, requestMayHaveSucceeded: false)
        case .cancelled:
            return .connection(message: "cancelled", requestMayHaveSucceeded: true)
        default:
            return .connection(message: error.localizedDescription, requestMayHaveSucceeded: true)
        }
    }
}

/// A data task that may be cancelled before or after it starts; the cancel is sent from a
/// thread of its own, never from the cancelling one. (Foundation's lock: the library runs on
/// iOS 17.)
// Unchecked Sendable: every stored property is read and written under `lock` only.
final class PendingDataTask: @unchecked Sendable {
    private let lock = NSLock()
    private var task: URLSessionDataTask?
    private var cancelled = false

    /// Starts `task`, and cancels it at once when `cancel()` came first.
    func start(_ task: URLSessionDataTask) {
        let cancelled = lock.withLock {
            self.task = task
            return self.cancelled
        }
        task.resume()
        if cancelled { task.cancel() }
    }

    /// Cancels the task (its completion then reports `URLError.cancelled`), or the one
    /// `start(_:)` will be given.
    func cancel() {
        let task = lock.withLock {
            cancelled = true
            return self.task
        }
        guard let task else { return }
        DispatchQueue.global().async { task.cancel() }
    }
}
