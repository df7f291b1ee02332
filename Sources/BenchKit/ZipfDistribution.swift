/// Draws ranks 0..<count with probability proportional to 1 / (rank + 1)^exponent: a few posts get
/// most of the traffic, as on a real feed. Inverse transform on a precomputed cumulative table.
public struct ZipfDistribution: Sendable {
    public let count: Int
    public let exponent: Double
    private let cumulative: [Double]

    /// - Precondition: `count` ≥ 1, `exponent` ≥ 0.
    public init(count: Int, exponent: Double) {
        precondition(count >= 1 && exponent >= 0, "Zipf needs at least one item and a non-negative exponent")
        self.count = count
        self.exponent = exponent
        var running = 0.0
        var table = [Double]()
        table.reserveCapacity(count)
        for rank in 1...count {
            running += 1 / Double(rank).power(exponent)
            table.append(running)
        }
        cumulative = table.map { $0 / running }
    }

    /// The probability of `rank`.
    public func probability(of rank: Int) -> Double {
        rank == 0 ? cumulative[0] : cumulative[rank] - cumulative[rank - 1]
    }

    /// One rank.
    public func sample<G: RandomNumberGenerator>(using generator: inout G) -> Int {
        let u = Double.random(in: 0..<1, using: &generator)
        var low = 0
        var high = count - 1
        while low < high {
            let middle = (low + high) / 2
            if cumulative[middle] > u { high = middle } else { low = middle + 1 }
        }
        return low
    }
}

extension Double {
    func power(_ exponent: Double) -> Double {
        exponent == 0 ? 1 : exp(exponent * log(self))
    }
}

#if canImport(Glibc)
    import Glibc
#endif
