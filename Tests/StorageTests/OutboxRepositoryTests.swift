import Foundation
import JSON
import PostgreSQL
import PostgreSQLTesting
import Storage
import Synchronization
import Testing

/// The outbox on real PostgreSQL: written with the change, fanned out at write time, claimed with
/// SKIP LOCKED leases, ordered per account and target, retried and given up by the caller's clock —
/// every instant is the caller's (a bind), so these tests pass times instead of sleeping.
@Suite struct OutboxRepositoryTests {
    /// A whole second, so that `t0 + n` round-trips through timestamptz exactly.
    static let t0 = Date(timeIntervalSince1970: (Date().timeIntervalSince1970).rounded(.down))
    static func at(_ seconds: Double) -> Date { t0.addingTimeInterval(seconds) }

    static func event(_ type: EventType = .userCreated, account: String = "acct", maxAge: Int = 3600,
                      fanOut: [OutboxEvent.FanOut] = [.webhooks], at createdAt: Date = t0) -> OutboxEvent {
        OutboxEvent(id: TestDatabase.uniqueName("evt"), type: type, accountId: account, data: .object([("userId", .string(account))]),
                    fanOut: fanOut, maxAgeSeconds: maxAge, createdAt: createdAt)
    }

    @discardableResult
    static func endpoint(_ s: Scratch, _ events: [EventType]) throws -> String {
        let id = TestDatabase.uniqueName("wh")
        _ = try s.database.webhooks.create(NewWebhookEndpoint(id: id, url: "https://example.com/\(id)", events: events, sealedSecret: [1, 2, 3]),
                                           audit: Fixture.audit("webhook.created", subject: id))
        return id
    }

    func claim(_ s: Scratch, at now: Date = t0, limit: Int = 10, lease: Double = 30, excluding: [String] = []) throws -> [ClaimedDelivery] {
        try s.database.outbox.claim(channel: OutboxRepository.webhookChannel, limit: limit, leaseSeconds: lease,
                                    leaseId: TestDatabase.uniqueName("lease"), excluding: excluding, now: now)
    }

    @Test func fansOutToTheEndpointsSubscribedAtWriteTimeInTheSameTransaction() throws {
        let s = try TestDatabase.scratch()
        let users = try Self.endpoint(s, [.userCreated])
        let passkeys = try Self.endpoint(s, [.passkeyCreated, .userCreated])
        let user = Fixture.user()
        let credential = Fixture.credential(userId: user.id)
        let created = Self.event(.userCreated, account: user.id), added = Self.event(.passkeyCreated, account: user.id)
        try s.database.accounts.register(newUser: user, credential: credential, session: Fixture.session(userId: user.id, credentialId: credential.id),
                                         audit: Fixture.audit("passkey.registered"), events: [created, added])
        #expect(try s.database.outbox.deliveries(channel: .webhook, target: users, limit: 10).map(\.eventId) == [created.id])
        #expect(try s.database.outbox.deliveries(channel: .webhook, target: passkeys, limit: 10).map(\.eventId) == [added.id, created.id])
        // A change that fails writes no event: the same username again rolls everything back.
        let clash = Fixture.user(username: user.username)
        let lost = Self.event(.userCreated, account: clash.id)
        #expect(throws: StorageError.conflict(.usernameTaken)) {
            try s.database.accounts.register(newUser: clash, credential: Fixture.credential(userId: clash.id),
                                             session: Fixture.session(userId: clash.id), audit: Fixture.audit("x"), events: [lost])
        }
        #expect(try s.count("SELECT count(*) AS n FROM outbox_events WHERE id = \(lost.id)") == 0)
        // Nobody subscribed, no direct fan-out: nothing stored at all.
        let unheard = Self.event(.sessionRevoked)
        try s.database.outbox.append([unheard])
        #expect(try s.count("SELECT count(*) AS n FROM outbox_events WHERE id = \(unheard.id)") == 0)
        // A deleted endpoint gets nothing from then on.
        #expect(try s.database.webhooks.delete(id: users, audit: Fixture.audit("webhook.deleted")))
        let later = Self.event(.userCreated)
        try s.database.outbox.append([later])
        #expect(try s.database.outbox.deliveries(channel: .webhook, target: users, limit: 10).map(\.eventId) == [created.id])
        #expect(try s.database.outbox.deliveries(channel: .webhook, target: passkeys, limit: 10).first?.eventId == later.id)
    }

    @Test func directFanOutForOtherChannels() throws {
        let s = try TestDatabase.scratch()
        let mail = Self.event(.mailMessage, fanOut: [.direct(channel: .mail, target: "mail-1")])
        try s.database.outbox.append([mail])
        let claimed = try s.database.outbox.claim(channel: .mail, limit: 5, leaseSeconds: 30, leaseId: "l1", now: Self.t0)
        #expect(claimed.map(\.eventId) == [mail.id] && claimed.first?.target == "mail-1")
        #expect(try claim(s).isEmpty, "the webhook channel does not see it")
    }

    @Test func theClaimReturnsWhatSendingNeeds() throws {
        let s = try TestDatabase.scratch()
        let live = try Self.endpoint(s, [.userCreated])
        let gone = try Self.endpoint(s, [.userCreated])
        try s.database.outbox.append([Self.event(account: "a")])
        // Deleted after the claim could see its delivery (a delete normally cancels them first).
        try s.connect().execute("UPDATE webhook_endpoints SET deleted_at = now() WHERE id = \(gone)")
        let batch = try claim(s)
        let toLive = try #require(batch.first { $0.target == live })
        #expect(toLive.endpoint?.id == live && toLive.endpoint?.url == "https://example.com/\(live)" && toLive.endpoint?.events == [.userCreated]
                && toLive.endpoint?.sealedSecret == [1, 2, 3] && toLive.mail == nil)
        #expect(batch.first { $0.target == gone }.map { $0.endpoint == nil && $0.mail == nil } == true, "a deleted endpoint comes back as nil")

        let c = try s.connect()
        try c.execute("INSERT INTO mail_messages (id, recipient, message) VALUES ('mail-1', 'a@example.com', \(Array("Subject: hi\r\n\r\nhi".utf8)))")
        try c.execute("INSERT INTO mail_messages (id, recipient, message) VALUES ('mail-2', 'b@example.com', \(Array("x".utf8)))")
        try s.database.mail.sent(id: "mail-2")
        try s.database.outbox.append([Self.event(.mailMessage, account: "m1", fanOut: [.direct(channel: .mail, target: "mail-1")]),
                                      Self.event(.mailMessage, account: "m2", fanOut: [.direct(channel: .mail, target: "mail-2")])])
        let mail = try s.database.outbox.claim(channel: .mail, limit: 5, leaseSeconds: 30, leaseId: "l1", now: Self.t0)
        #expect(mail.first { $0.target == "mail-1" }?.mail == QueuedMail(recipient: "a@example.com", message: Array("Subject: hi\r\n\r\nhi".utf8)))
        #expect(mail.first { $0.target == "mail-2" }.map { $0.mail == nil && $0.endpoint == nil } == true, "already sent: nothing to send")
    }

    /// ARCHITECTURE.md "A webhook delivery, through the code": a delivery costs its claim (which
    /// brings the endpoint along) and its record, one statement each, and no read of its own.
    @Test func aDeliveryIsItsClaimAndItsRecord() throws {
        let s = try TestDatabase.scratch()
        try Self.endpoint(s, [.userCreated])
        try s.database.outbox.append([Self.event(account: "a")])
        let (batch, claiming) = try PostgresDeadline.within(seconds: 5, tracing: true) { try claim(s) }
        let delivery = try #require(batch.first)
        #expect(delivery.endpoint != nil)
        #expect(claiming.counts == RoundTripCounts(writes: 1), "\(claiming.statements)")
        let (recorded, recording) = try PostgresDeadline.within(seconds: 5, tracing: true) {
            try s.database.outbox.delivered(delivery, statusCode: 204, now: Self.at(1))
        }
        #expect(recorded)
        #expect(recording.counts == RoundTripCounts(writes: 1), "\(recording.statements)")
    }

    @Test func writingDeliveriesNotifiesEveryListenerAtCommit() throws {
        let s = try TestDatabase.scratch()
        let listener = try PostgresListener(url: s.url, channels: ["latchkey_outbox"])
        try Self.endpoint(s, [.userCreated])
        // Two deliveries on one channel in one statement: one notification, the channel its payload.
        try s.database.outbox.append([Self.event(account: "a"), Self.event(account: "b")])
        // Nobody subscribed: nothing written, nobody woken. A change that fails: rolled back, nobody woken.
        try s.database.outbox.append([Self.event(.sessionRevoked)])
        let user = Fixture.user()
        try s.database.accounts.register(newUser: user, credential: Fixture.credential(userId: user.id),
                                         session: Fixture.session(userId: user.id), audit: Fixture.audit("x"), events: [])
        let clash = Fixture.user(username: user.username)
        #expect(throws: StorageError.conflict(.usernameTaken)) {
            try s.database.accounts.register(newUser: clash, credential: Fixture.credential(userId: clash.id),
                                             session: Fixture.session(userId: clash.id), audit: Fixture.audit("x"),
                                             events: [Self.event(account: clash.id)])
        }
        try s.database.outbox.append([Self.event(.mailMessage, fanOut: [.direct(channel: .mail, target: "mail-9")])])
        // Notifications arrive in commit order: once the mail's is here, whatever came before it is too.
        var payloads: [String] = []
        for _ in 0..<200 where !payloads.contains("mail") { payloads += try listener.wait(timeout: 0.05).map(\.payload) }
        #expect(payloads == ["webhook", "mail"])
    }

    @Test func theCallersClockIsWhatIsStored() throws {
        let s = try TestDatabase.scratch()
        let target = try Self.endpoint(s, [.userCreated])
        // An event written an hour "ago" by the caller's clock: stored with that time, due from it.
        let e = Self.event(maxAge: 7200, at: Self.at(-3600))
        try s.database.outbox.append([e])
        let row = try #require(try s.database.outbox.deliveries(channel: .webhook, target: target, limit: 1).first)
        #expect(row.createdAt == Self.at(-3600) && row.nextAttemptAt == Self.at(-3600))
        #expect(try s.database.outbox.depth(now: Self.t0) == [OutboxDepth(channel: .webhook, pending: 1, oldestPendingSeconds: 3600)])
        let d = try #require(try claim(s).first)
        #expect(d.createdAt == Self.at(-3600) && d.expiresAt == Self.at(3600) && d.leasedUntil == Self.at(30))
    }

    @Test func aDeliveryScheduledForLaterIsNoBacklogUntilItIsDue() throws {
        let s = try TestDatabase.scratch()
        var ping = Self.event(.mailMessage, maxAge: 7200, fanOut: [.direct(channel: .mail, target: "later-1")], at: Self.at(-600))
        ping.notBefore = Self.at(60)
        try s.database.outbox.append([ping])
        #expect(try s.database.outbox.depth(now: Self.t0).isEmpty, "due in a minute: nothing is late yet")
        #expect(try s.database.outbox.depth(now: Self.at(90)) == [OutboxDepth(channel: .mail, pending: 1, oldestPendingSeconds: 30)],
                "due for 30 s, not for the 690 s since its event was written")
    }

    @Test func aClaimIsALeaseThatComesBackWhenItRunsOut() throws {
        let s = try TestDatabase.scratch()
        try Self.endpoint(s, [.userCreated])
        try s.database.outbox.append([Self.event()])
        let first = try claim(s, lease: 3)
        #expect(first.count == 1 && first[0].attempt == 1 && first[0].leasedUntil == Self.at(3))
        #expect(try claim(s, at: Self.at(2.999)).isEmpty, "leased: nobody else gets it")
        let second = try claim(s, at: Self.at(3))
        #expect(second.map(\.eventId) == first.map(\.eventId) && second[0].attempt == 2)
        // The first claim's lease is gone: its outcome is not recorded.
        #expect(try !s.database.outbox.delivered(first[0], statusCode: 200, now: Self.at(4)))
        #expect(try s.database.outbox.delivered(second[0], statusCode: 204, now: Self.at(4)))
        let row = try #require(try s.database.outbox.deliveries(channel: .webhook, target: second[0].target, limit: 1).first)
        #expect(row.status == .delivered && row.attempts == 2 && row.lastStatusCode == 204 && row.nextAttemptAt == nil)
        #expect(try claim(s, at: Self.at(100)).isEmpty)
    }

    @Test func aRetryIsDueAtItsTimeAndAGiveUpIsFinal() throws {
        let s = try TestDatabase.scratch()
        let target = try Self.endpoint(s, [.userCreated])
        try s.database.outbox.append([Self.event(maxAge: 20)])
        let d = try #require(try claim(s).first)
        #expect(try s.database.outbox.retry(d, statusCode: 500, error: "HTTP 500", at: Self.at(2)))
        let pending = try #require(try s.database.outbox.deliveries(channel: .webhook, target: target, limit: 1).first)
        #expect(pending.status == .pending && pending.nextAttemptAt == Self.at(2) && pending.lastStatusCode == 500)
        #expect(try claim(s, at: Self.at(1.999)).isEmpty, "not due before its retry time")
        let again = try #require(try claim(s, at: Self.at(2)).first)
        #expect(again.attempt == 2)
        // The caller gave up (e.g. its next retry would fall after the age limit): failed, not retried.
        #expect(try s.database.outbox.failed(again, statusCode: nil, error: "refused", now: Self.at(3)))
        let row = try #require(try s.database.outbox.deliveries(channel: .webhook, target: target, limit: 1).first)
        #expect(row.status == .failed && row.attempts == 2 && row.lastStatusCode == nil && row.nextAttemptAt == nil && row.lastError == "refused")
        #expect(try claim(s, at: Self.at(100)).isEmpty)
    }

    @Test func expireAndPurgeGoByTheCallersClock() throws {
        let s = try TestDatabase.scratch()
        let target = try Self.endpoint(s, [.userCreated])
        // expire(): a pending delivery nobody claimed before its limit; a leased one waits for its lease.
        try s.database.outbox.append([Self.event(account: "a", maxAge: 1), Self.event(account: "b", maxAge: 1)])
        let leased = try #require(try claim(s, limit: 1, lease: 5).first)
        #expect(try s.database.outbox.expire(now: Self.at(0.999)) == 0)
        #expect(try s.database.outbox.expire(now: Self.at(1)) == 1)
        #expect(try s.database.outbox.expire(now: Self.at(5)) == 1, "the leased one, once its lease ran out")
        #expect(try !s.database.outbox.delivered(leased, statusCode: 200, now: Self.at(6)), "given up: a late outcome changes nothing")
        let rows = try s.database.outbox.deliveries(channel: .webhook, target: target, limit: 10)
        #expect(rows.count == 2 && rows.allSatisfy { $0.status == .failed && $0.lastError == "expired" })
        // purgeFinished(): events written before the cutoff whose deliveries are all finished.
        #expect(try s.database.outbox.purgeFinished(writtenBefore: Self.t0) == 0)
        #expect(try s.database.outbox.purgeFinished(writtenBefore: Self.at(0.001)) == 2)
        #expect(try s.database.outbox.deliveries(channel: .webhook, target: target, limit: 10).isEmpty)
    }

    @Test func perTargetAndAccountInWriteOrder() throws {
        let s = try TestDatabase.scratch()
        try Self.endpoint(s, [.userCreated, .passkeyCreated])
        let a1 = Self.event(.userCreated, account: "a"), a2 = Self.event(.passkeyCreated, account: "a")
        let b1 = Self.event(.userCreated, account: "b")
        try s.database.outbox.append([a1, a2, b1])
        let batch = try claim(s)
        #expect(Set(batch.map(\.eventId)) == [a1.id, b1.id], "a2 waits for a1")
        let first = try #require(batch.first { $0.eventId == a1.id })
        #expect(try s.database.outbox.retry(first, statusCode: 500, error: "x", at: Self.at(0.05)))
        #expect(try claim(s, at: Self.at(0.05)).map(\.eventId) == [a1.id], "a retry of a1 still goes before a2")
        // Excluded (busy) targets are skipped.
        #expect(try claim(s, at: Self.at(100), excluding: [first.target]).isEmpty)
    }

    @Test func concurrentWorkersNeverClaimOneDeliveryTwice() throws {
        let s = try TestDatabase.scratch()
        try Self.endpoint(s, [.userCreated])
        try s.database.outbox.append((0..<60).map { i in Self.event(account: "acct-\(i)") })
        let seen = Mutex<[String]>([])
        let errors = onThreads(6) { _ in
            let other = Database(url: s.url, connections: 1)
            defer { other.shutdown() }
            while true {
                let batch = try other.outbox.claim(channel: .webhook, limit: 3, leaseSeconds: 30, leaseId: TestDatabase.uniqueName("l"),
                                                   now: Self.t0)
                if batch.isEmpty { return }
                seen.withLock { $0 += batch.map(\.eventId) }
                for d in batch { _ = try other.outbox.delivered(d, statusCode: 200, now: Self.t0) }
            }
        }
        #expect(errors.isEmpty)
        let ids = seen.withLock { $0 }
        #expect(ids.count == 60 && Set(ids).count == 60)
    }

    @Test func everyReportedChangeWritesItsEventsInItsOwnTransaction() throws {
        let s = try TestDatabase.scratch()
        let target = try Self.endpoint(s, [.passkeyRenamed, .passkeyRevoked, .sessionRevoked, .deviceKeyEnrolled,
                                           .deviceKeyRevoked, .stepUpApproved, .passkeyCloneSuspected])
        let (user, credential) = try s.registered()
        _ = try s.database.accounts.rename(userId: user.id, credentialId: credential.id, name: "n", renamedEvent: Fixture.event(.passkeyRenamed))
        _ = try s.database.accounts.rename(userId: "nobody", credentialId: credential.id, name: "n", renamedEvent: Fixture.event(.passkeyRenamed))
        try s.database.accounts.flag(credentialId: credential.id, audit: Fixture.audit("passkey.flagged"), events: [Self.event(.passkeyCloneSuspected)])
        let key = Fixture.deviceKey(userId: user.id)
        _ = try s.database.deviceKeys.enrol(key, gate: try s.deviceKeyGate(userId: user.id), audit: Fixture.template("device_key.enrolled"),
                                            enrolled: [Self.event(.deviceKeyEnrolled)], replacedEvent: Fixture.event(.deviceKeyRevoked))
        _ = try s.database.deviceKeys.enrol(Fixture.deviceKey(userId: user.id), gate: try s.deviceKeyGate(userId: user.id),
                                            audit: Fixture.template("device_key.enrolled"), enrolled: [Self.event(.deviceKeyEnrolled)],
                                            replacedEvent: Fixture.event(.deviceKeyRevoked))
        #expect(try s.database.deviceKeys.insertReceipt(Fixture.receipt(userId: user.id, keyId: "k"), liveDeviceKeyId: nil, credentialUse: nil,
                                                        audit: [], events: [Self.event(.stepUpApproved)]))
        let ended = try #require(try s.database.accounts.revoke(userId: user.id, credentialId: credential.id, audit: Fixture.audit("passkey.revoked"),
                                                                revokedEvent: Fixture.event(.passkeyRevoked), sessionEvent: Fixture.event(.sessionRevoked)))
        #expect(ended.count == 1)
        let types = try s.database.outbox.deliveries(channel: .webhook, target: target, limit: 50).reversed().map(\.type)
        #expect(Array(types) == [.passkeyRenamed, .passkeyCloneSuspected, .deviceKeyEnrolled, .deviceKeyEnrolled, .deviceKeyRevoked,
                                 .stepUpApproved, .passkeyRevoked, .sessionRevoked])
    }
}
