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
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await session.data(for: request)
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
