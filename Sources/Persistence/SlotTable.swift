import CounterCore
import PostgresDriver

/// Who owns each slot, in PostgreSQL (`counter_slots`): the owner's node id and incarnation, and
/// the slot's epoch. Every change of owner is one conditional update that draws a new epoch from
/// `counter_epochs` — only if the slot's epoch is still the one the changer saw — so two nodes
/// claiming one slot cannot both win, and an epoch is never given twice.
///
/// The flush transaction checks its slots' epochs here (`staleSlots(_:on:)`), which locks their
/// rows until it ends: a claim waits for the flush that holds them, and a flush by a node that
/// has lost a slot rolls back.
public struct SlotTable: Sendable {
    /// One slot's row.
    public struct Row: Sendable, Equatable {
        public let owner: String?
        public let incarnation: Int64?
        public let epoch: Int64

        public init(owner: String?, incarnation: Int64?, epoch: Int64) {
            self.owner = owner
            self.incarnation = incarnation
            self.epoch = epoch
        }
    }

    /// A change of owner to make if the slot still has `expectedEpoch`.
    public struct Claim: Sendable, Equatable {
        public let slot: UInt16
        public let expectedEpoch: Int64

        public init(slot: UInt16, expectedEpoch: Int64) {
            self.slot = slot
            self.expectedEpoch = expectedEpoch
        }
    }

    private let pool: PostgresPool
    /// Whose slots (the Redis key prefix): deployments sharing a database each have their own.
    public let deployment: String

    public init(pool: PostgresPool, deployment: String) {
        self.pool = pool
        self.deployment = deployment
    }

    /// Creates the deployment's 16,384 rows (unowned, epoch 0) where missing.
    public func createRows() async throws {
        try await pool.query(
            """
            INSERT INTO counter_slots (deployment, slot) SELECT $1, generate_series(0, 16383)
            ON CONFLICT DO NOTHING
            """, [.text(deployment)])
    }

    /// A version of the deployment's map: its rows and the sum of their epochs. Every change of
    /// owner gives a slot a new epoch drawn from `counter_epochs`, above any drawn before, so
    /// the sum rises with every committed change — also when changes commit in another order
    /// than their epochs were drawn, which the highest epoch alone would miss. Read it before
    /// `rows()`: rows read after an unchanged version are the same rows.
    public struct Version: Sendable, Hashable {
        public let rows: Int64
        public let epochSum: Int64

        public init(rows: Int64, epochSum: Int64) {
            self.rows = rows
            self.epochSum = epochSum
        }
    }

    /// The map's version now (one aggregate, not the 16,384 rows).
    public func version() async throws -> Version {
        let rows = try await pool.query(
            "SELECT count(*), coalesce(sum(epoch), 0) FROM counter_slots WHERE deployment = $1",
            [.text(deployment)])
        guard let row = rows.first else { return Version(rows: 0, epochSum: 0) }
        return Version(rows: try row.int64(0), epochSum: try row.int64(1))
    }

    /// Every slot's row, indexed by slot number (16,384 of them once migrated).
    public func rows() async throws -> [Row] {
        let rows = try await pool.query(
            "SELECT slot, owner, owner_incarnation, epoch FROM counter_slots WHERE deployment = $1 ORDER BY slot",
            [.text(deployment)])
        var result: [Row] = []
        result.reserveCapacity(rows.count)
        for row in rows {
            result.append(Row(owner: row.string(1), incarnation: try row.optionalInt64(2), epoch: try row.int64(3)))
        }
        return result
    }

    /// Gives each slot of `claims` to `owner` (incarnation `incarnation`) with a new epoch, if its
    /// epoch is still the expected one. Waits for a flush transaction that holds a slot's row.
    /// - Returns: the slots won, with their new epochs; the others changed owner meanwhile.
    public func assign(_ claims: [Claim], to owner: String, incarnation: Int64) async throws -> [UInt16: Int64] {
        guard !claims.isEmpty else { return [:] }
        let sorted = claims.sorted { $0.slot < $1.slot }
        let rows = try await pool.query(
            """
            UPDATE counter_slots s SET owner = $1, owner_incarnation = $2, epoch = nextval('counter_epochs')
            FROM unnest($3::bigint[], $4::bigint[]) AS c(slot, epoch)
            WHERE s.deployment = $5 AND s.slot = c.slot AND s.epoch = c.epoch
            RETURNING s.slot, s.epoch
            """,
            [
                .text(owner), .int64(incarnation), .int64Array(sorted.map { Int64($0.slot) }),
                .int64Array(sorted.map(\.expectedEpoch)), .text(deployment),
            ])
        var won: [UInt16: Int64] = [:]
        for row in rows { won[UInt16(try row.int64(0))] = try row.int64(1) }
        return won
    }

    /// The slots of `epochs` whose epoch in PostgreSQL is no longer the given one, read inside
    /// the caller's transaction on `connection` with their rows locked (`FOR SHARE`) until it
    /// ends: while it runs, nobody can change their owner.
    public static func staleSlots(
        _ epochs: [UInt16: Int64], deployment: String,
        on connection: isolated PostgresConnection
    ) throws(PostgresError) -> [UInt16] {
        guard !epochs.isEmpty else { return [] }
        let slots = epochs.keys.sorted()
        let rows = try connection.query(
            "SELECT slot, epoch FROM counter_slots WHERE deployment = $2 AND slot = ANY($1::bigint[]) ORDER BY slot FOR SHARE",
            [.int64Array(slots.map { Int64($0) }), .text(deployment)])
        var current: [UInt16: Int64] = [:]
        for row in rows { current[UInt16(try row.int64(0))] = try row.int64(1) }
        return slots.filter { current[$0] != epochs[$0] }
    }
}
