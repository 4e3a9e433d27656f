import Foundation
import JSON
import PostgreSQL
@testable import Storage
import Testing

@Suite struct AuditRepositoryTests {
    @Test func entriesDecodeDetailAsJSON() throws {
        let s = try TestDatabase.scratch()
        let detail: JSONValue = ["receiptId": "r1", "nested": ["list": [1, 2.5, true, nil], "text": "é \"q\""], "n": 3]
        try s.database.audit.append(AuditRecord(actor: "alice", action: "step_up.approved", subject: "alice", detail: detail))
        try s.database.audit.append(AuditRecord(actor: "cli", action: "origin.added", subject: nil))
        let entries = try s.database.audit.entries(limit: 10, before: nil)
        #expect(entries.map(\.action) == ["origin.added", "step_up.approved"])
        #expect(entries[0].detail == .object([]) && entries[0].subject == nil)
        // jsonb reorders object members; compare canonical forms.
        #expect(entries[1].detail.canonicalized() == detail.canonicalized())
        #expect(entries[1].actor == "alice" && entries[1].subject == "alice")
    }

    @Test func entriesPageBackwards() throws {
        let s = try TestDatabase.scratch()
        for i in 0..<5 { try s.database.audit.append(Fixture.audit("a\(i)")) }
        let firstPage = try s.database.audit.entries(limit: 2, before: nil)
        #expect(firstPage.map(\.action) == ["a4", "a3"])
        #expect(try s.database.audit.entries(limit: 10, before: firstPage[1].id).map(\.action) == ["a2", "a1", "a0"])
    }

    /// Issue 24 (0014): the subject index holds only lines about someone else; the user filter
    /// still finds a user's own lines (actor = subject), lines they did to others and lines others
    /// did to them, and nothing else.
    @Test func theUserFilterFindsOwnLinesAndLinesAboutTheUser() throws {
        let s = try TestDatabase.scratch()
        try s.database.audit.append(AuditRecord(actor: "alice", action: "passkey.login", subject: "alice"))
        try s.database.audit.append(AuditRecord(actor: "admin", action: "user.disabled", subject: "alice"))
        try s.database.audit.append(AuditRecord(actor: "alice", action: "admin.granted", subject: "bob"))
        try s.database.audit.append(AuditRecord(actor: "bob", action: "passkey.login", subject: "bob"))
        try s.database.audit.append(AuditRecord(actor: "alice", action: "origin.added", subject: nil))
        let alice = try s.database.audit.entries(limit: 10, before: nil, user: "alice").map(\.action)
        #expect(alice == ["origin.added", "admin.granted", "user.disabled", "passkey.login"])
        let bob = try s.database.audit.entries(limit: 10, before: nil, user: "bob").map(\.action)
        #expect(bob == ["passkey.login", "admin.granted"])
        // The partial index is what the subject arm can use: its predicate is in the query.
        let indexed = try s.connect().query(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'audit_log_subject'").first?.string("indexdef") ?? ""
        #expect(indexed.contains("WHERE (subject <> actor)"))
    }

    @Test func theLogIsAppendOnly() throws {
        let s = try TestDatabase.scratch()
        try s.database.audit.append(Fixture.audit("x"))
        #expect(throws: (any Error).self) { try s.connect().execute("DELETE FROM audit_log") }
    }

    /// Fragments keep their values as binds when spliced, numbered in order.
    @Test func splicedFragmentsRenumberTheirBinds() {
        let a: SQL = "x = \("one") AND y = \(2)"
        let b: SQL = "z = \(true)"
        let statement = SQL.with([("c", a)], "SELECT \(fragment: b) AND w = \("four")")
        #expect(statement.text == "WITH c AS (x = $1 AND y = $2)\nSELECT z = $3 AND w = $4")
        #expect(statement.binds == [.text("one"), .int64(2), .bool(true), .text("four")])
    }
}
