import Persistence
import TestSupport
import Testing

@Suite("Slot table against a real PostgreSQL")
struct SlotTableTests {
    @Test("a deployment's slots start unowned at epoch 0; deployments do not see each other's")
    func rowsPerDeployment() async throws {
        let pool = try await TestEnvironment.migratedPool()
        let mine = SlotTable(pool: pool, deployment: TestEnvironment.uniqueKeyPrefix("slots"))
        let other = SlotTable(pool: pool, deployment: TestEnvironment.uniqueKeyPrefix("slots"))
        try await mine.createRows()
        try await mine.createRows()
        let rows = try await mine.rows()
        #expect(rows.count == 16_384)
        #expect(rows.allSatisfy { $0 == SlotTable.Row(owner: nil, incarnation: nil, epoch: 0) })
        #expect(try await mine.version() == SlotTable.Version(rows: 16_384, epochSum: 0))
        #expect(try await other.rows().isEmpty)
        #expect(try await other.version() == SlotTable.Version(rows: 0, epochSum: 0))
        let won = try await mine.assign([.init(slot: 5, expectedEpoch: 0)], to: "a", incarnation: 1)
        #expect(try await mine.version() == SlotTable.Version(rows: 16_384, epochSum: won[5]!))
        #expect(try await other.version() == SlotTable.Version(rows: 0, epochSum: 0))
        await pool.close()
    }

    @Test("of two claims on one slot at the same epoch, one wins with a new epoch; the map's version rises")
    func oneWinner() async throws {
        let pool = try await TestEnvironment.migratedPool()
        let table = SlotTable(pool: pool, deployment: TestEnvironment.uniqueKeyPrefix("slots"))
        try await table.createRows()
        async let first = table.assign([.init(slot: 7, expectedEpoch: 0), .init(slot: 8, expectedEpoch: 0)], to: "a", incarnation: 1)
        async let second = table.assign([.init(slot: 7, expectedEpoch: 0)], to: "b", incarnation: 2)
        let (a, b) = try await (first, second)
        #expect(a.keys.contains(7) != b.keys.contains(7), "exactly one claim wins slot 7")
        #expect(a[8] != nil)
        let rows = try await table.rows()
        let winner = a[7] != nil ? ("a", Int64(1), a[7]!) : ("b", Int64(2), b[7]!)
        #expect(rows[7] == SlotTable.Row(owner: winner.0, incarnation: winner.1, epoch: winner.2))
        #expect(winner.2 > 0)
        let version = try await table.version()
        #expect(version.epochSum == a.values.reduce(0, +) + b.values.reduce(0, +))

        // A→B→A: the slot comes back with an epoch it never had.
        let toB = try await table.assign([.init(slot: 8, expectedEpoch: a[8]!)], to: "b", incarnation: 2)
        let backToA = try await table.assign([.init(slot: 8, expectedEpoch: toB[8]!)], to: "a", incarnation: 1)
        #expect(backToA[8]! > toB[8]! && toB[8]! > a[8]!)
        #expect(try await table.version().epochSum > version.epochSum, "every change of owner changes the version")
        #expect(
            try await table.assign([.init(slot: 8, expectedEpoch: a[8]!)], to: "c", incarnation: 3).isEmpty,
            "a claim on an epoch that is gone wins nothing")
        await pool.close()
    }

    @Test("a flush transaction sees its stale slots, and a claim waits for the transaction that checked them")
    func fenceInTransaction() async throws {
        let pool = try await TestEnvironment.migratedPool()
        let deployment = TestEnvironment.uniqueKeyPrefix("slots")
        let table = SlotTable(pool: pool, deployment: deployment)
        try await table.createRows()
        let held = try await table.assign([.init(slot: 1, expectedEpoch: 0), .init(slot: 2, expectedEpoch: 0)], to: "a", incarnation: 1)
        let taken = try await table.assign([.init(slot: 2, expectedEpoch: held[2]!)], to: "b", incarnation: 2)
        let stale = try await pool.withTransaction { connection in
            try SlotTable.staleSlots([1: held[1]!, 2: held[2]!], deployment: deployment, on: connection)
        }
        #expect(stale == [2])

        // A transaction that checked slot 1 holds its row: the claim lands only after it ends.
        let order = OrderLog()
        async let flush: Void = pool.withTransaction { connection in
            let stale = try SlotTable.staleSlots([1: held[1]!], deployment: deployment, on: connection)
            #expect(stale.isEmpty)
            order.append("checked")
            _ = try connection.query("SELECT pg_sleep(1)")
            order.append("committed")
        }
        // The claim starts once the transaction has checked (however long a busy machine takes
        // to get it there); it must then wait out the transaction's second.
        let deadline = ContinuousClock.now + .seconds(30)
        while !order.entries.contains("checked") && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        let claim = try await table.assign([.init(slot: 1, expectedEpoch: held[1]!)], to: "b", incarnation: 2)
        order.append("claimed")
        try await flush
        #expect(claim[1] != nil)
        #expect(order.entries == ["checked", "committed", "claimed"])
        #expect(taken[2] != nil)
        await pool.close()
    }
}
