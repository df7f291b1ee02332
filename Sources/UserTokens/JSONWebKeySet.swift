import CounterCore
import Foundation

/// A JWKS document (RFC 7517 §5) read into the keys tokens can be verified with: RSA keys
/// (`kty` `RSA`, `n`, `e`) for RS256 and P-256 keys (`kty` `EC`, `crv` `P-256`, `x`, `y`) for
/// ES256. Keys for encryption (`use` `enc`), of other types or curves, or naming another `alg`
/// are skipped, each with the reason. Pure apart from OpenSSL building the keys.
public enum JSONWebKeySet {
    private struct Document: Decodable {
        let keys: [Key]
    }

    private struct Key: Decodable {
        let kty: String?
        let kid: String?
        let use: String?
        let alg: String?
        let n: String?
        let e: String?
        let crv: String?
        let x: String?
        let y: String?
    }

    public struct Error: Swift.Error, CustomStringConvertible {
        public let description: String
    }

    /// The usable keys in `data`, and why each other key was skipped.
    /// - Throws: `Error` when `data` is not a JWKS document (a JSON object with a `keys` array).
    public static func parse(_ data: Data) throws -> (keys: [PublicKey], skipped: [String]) {
        let document: Document
        do {
            document = try JSONDecoder().decode(Document.self, from: data)
        } catch {
            throw Error(description: "not a JWKS document (a JSON object with a \"keys\" array): \(error)")
        }
        var keys: [PublicKey] = []
        var skipped: [String] = []
        for (index, key) in document.keys.enumerated() {
            let name = key.kid.map { "key \"\($0)\"" } ?? "key #\(index + 1)"
            if let use = key.use, use != "sig" {
                skipped.append("\(name): \"use\" is \"\(use)\", not \"sig\"")
                continue
            }
            switch key.kty {
            case "RSA":
                guard key.alg == nil || key.alg == "RS256" else {
                    skipped.append("\(name): RSA key for \(key.alg ?? ""), only RS256 is accepted")
                    continue
                }
                guard let n = key.n.flatMap({ Base64URL.decode($0.utf8) }), let e = key.e.flatMap({ Base64URL.decode($0.utf8) }),
                    let publicKey = PublicKey.rsa(modulus: n, exponent: e, id: key.kid)
                else {
                    skipped.append("\(name): \"n\"/\"e\" are not an RSA public key of at least \(PublicKey.minimumRSABits) bits")
                    continue
                }
                keys.append(publicKey)
            case "EC":
                guard key.crv == "P-256" else {
                    skipped.append("\(name): curve \(key.crv ?? "none"), only P-256 is accepted")
                    continue
                }
                guard key.alg == nil || key.alg == "ES256" else {
                    skipped.append("\(name): P-256 key for \(key.alg ?? ""), only ES256 is accepted")
                    continue
                }
                guard let x = key.x.flatMap({ Base64URL.decode($0.utf8) }), let y = key.y.flatMap({ Base64URL.decode($0.utf8) }),
                    let publicKey = PublicKey.p256(x: x, y: y, id: key.kid)
                else {
                    skipped.append("\(name): \"x\"/\"y\" are not a point on P-256")
                    continue
                }
                keys.append(publicKey)
            default:
                skipped.append("\(name): key type \(key.kty ?? "none") is not RSA or EC")
            }
        }
        return (keys, skipped)
    }
}
