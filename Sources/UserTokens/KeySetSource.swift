import CounterCore
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Where the RS256/ES256 keys come from: a JWKS file, or a JWKS URL of the identity provider
/// (or one public key in PEM).
/// Read at start (a node that cannot read its keys does not start), then again every refresh
/// interval: a rotated key is picked up without a restart; a read that fails keeps the keys
/// it had and says so in the log.
public struct KeySetSource: Sendable {
    /// A path, or an `http://`/`https://` URL.
    public let location: String

    public init(location: String) {
        self.location = location
    }

    var url: URL? {
        guard location.hasPrefix("http://") || location.hasPrefix("https://") else { return nil }
        return URL(string: location)
    }

    /// Reads and parses the key set.
    /// - Throws: when it cannot be read, is not a JWKS document, or holds no usable key.
    public func load() async throws -> (keys: [PublicKey], skipped: [String]) {
        let data: Data
        if let url {
            var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: 10)
            request.setValue("application/json", forHTTPHeaderField: "Accept")
            let (body, response) = try await URLSession.shared.data(for: request)
            guard let status = (response as? HTTPURLResponse)?.statusCode, status == 200 else {
                throw JSONWebKeySet.Error(description: "GET \(location) answered \((response as? HTTPURLResponse)?.statusCode ?? 0)")
            }
            data = body
        } else {
            do {
                data = try Data(contentsOf: URL(fileURLWithPath: location))
            } catch {
                throw JSONWebKeySet.Error(description: "cannot read \(location): \(error.localizedDescription)")
            }
        }
        if data.starts(with: Array("-----BEGIN PUBLIC KEY-----".utf8)) {
            // One public key in PEM, as some providers hand it out (Laravel Passport's
            // oauth-public.key): it verifies tokens of its kind, whatever their kid.
            guard let key = PublicKey.pem(String(decoding: data, as: UTF8.self)) else {
                throw JSONWebKeySet.Error(description: "\(location) is not an RSA (2048 bits or more) or P-256 public key in PEM")
            }
            return ([key], [])
        }
        let parsed = try JSONWebKeySet.parse(data)
        guard !parsed.keys.isEmpty else {
            throw JSONWebKeySet.Error(
                description: "\(location) has no usable key\(parsed.skipped.isEmpty ? "" : ": " + parsed.skipped.joined(separator: "; "))")
        }
        return parsed
    }

    /// Reads the key set into `verifier` every `interval` until cancelled, logging each change
    /// (`user_token_keys`) and each failure (`user_token_keys_failed`, the old keys stay).
    public func refresh(_ verifier: TokenVerifier, every interval: Duration, log: NodeLog) async {
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: interval)
            } catch {
                return
            }
            do {
                let (keys, skipped) = try await load()
                if verifier.replaceKeys(keys) {
                    log.log(
                        .info, "user_token_keys",
                        [
                            "source": location, "kids": verifier.keyIDs.joined(separator: ","),
                            "skipped": String(skipped.count),
                        ])
                }
            } catch {
                log.log(.warn, "user_token_keys_failed", ["source": location, "error": "\(error)", "kept": String(verifier.keyIDs.count)])
            }
        }
    }
}
