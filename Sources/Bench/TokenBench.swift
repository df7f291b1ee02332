import CounterCore
import Foundation
import UserTokens

/// `counter-bench tokens`: what an end user's token costs the node per request, in process (no
/// servers): the first request of a token (parse, signature, claims) for each algorithm, and
/// every request after it on a keep-alive connection (SHA-256 of the token and a lookup in the
/// verified-token cache), with `--tokens` distinct tokens in the cache.
struct TokenBench {
    var tokens = 1_000
    var rounds = 200

    init(arguments: [String]) throws {
        var reader = BenchArguments(arguments)
        var tokens = 1_000
        var rounds = 200
        try reader.forEachFlag { flag, reader in
            switch flag {
            case "--tokens": tokens = try reader.number(flag, 1...1_000_000)
            case "--rounds": rounds = try reader.number(flag, 1...100_000)
            default: return false
            }
            return true
        }
        self.tokens = tokens
        self.rounds = rounds
    }

    func run() throws {
        let secret = "counter-bench-token-secret-0123456789abcdef"
        let signers = [TokenSigner(secret: secret), TokenSigner(generating: .rs256, keyID: "rs"), TokenSigner(generating: .es256, keyID: "es")]
        print("counter-bench tokens: \(tokens) tokens per algorithm, \(rounds) rounds over them once cached")
        print("  algorithm   first request µs   cached request µs")
        for signer in signers {
            let verifier = TokenVerifier(secret: HMACSecret(secret)!, keySet: true, rules: ClaimRules())
            verifier.replaceKeys(try JSONWebKeySet.parse(TokenSigner.keySet(signers.filter { $0.algorithm != .hs256 })).keys)
            let issued = (0..<tokens).map { Array(signer.token(user: Int64($0) + 1).utf8) }
            var sum: Int64 = 0
            let firstStart = ContinuousClock.now
            for token in issued { sum &+= try verifier.user(of: token) }
            let first = (ContinuousClock.now - firstStart).inSeconds / Double(tokens) * 1e6
            let cachedStart = ContinuousClock.now
            for _ in 0..<rounds {
                for token in issued { sum &+= try verifier.user(of: token) }
            }
            let cached = (ContinuousClock.now - cachedStart).inSeconds / Double(tokens * rounds) * 1e6
            guard sum > 0 else { throw BenchCheckFailure(message: "no user verified") }
            print(String(format: "  %@       %10.1f           %8.2f", signer.algorithm.rawValue as NSString, first, cached))
        }
    }
}
