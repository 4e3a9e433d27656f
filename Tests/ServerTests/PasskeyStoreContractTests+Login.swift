import Foundation
@testable import LatchkeyServer
@testable import Storage
import Testing

extension PasskeyStoreContractTests {
    /// What each call of the login script answered.
    static let expectedLogin = [
        "dave: registered, registered, registered",
        "erin: registered",
        "options: nobody nil, dave usr_dave [D1,D2,D3] [[\"internal\"], [\"internal\"], [\"internal\"]]",
        "revoke E1: ended [\"f-E1\"] left []",
        "options: erin usr_erin [] []",
        "unknown: used=false live=true login=nil accepted=[] → refused; again: not decided → challengeUnusable",
        "revoked: used=false live=true login=nil accepted=[] → refused",
        "expired: not decided → challengeUnusable",
        "sign in: used=false live=true login=D1/dave count=5 flagged=false accepted=[D1,D2,D3] → session(Storage.RecordedUse(signCount: 6, flagged: false)), session live, audit 2",
        "same challenge: not decided → challengeUnusable, session none",
        "same counter: used=false live=true login=D1/dave count=6 flagged=false accepted=[D1,D2,D3] → conflict(signCountRegression), session none, audit 2",
        "that challenge again: not decided → challengeUnusable",
        "same counter, flag: used=false live=true login=D1/dave count=6 flagged=false accepted=[D1,D2,D3] → session(Storage.RecordedUse(signCount: 6, flagged: true)), session live",
        "lower counter, flag: used=false live=true login=D1/dave count=6 flagged=true accepted=[D1,D2,D3] → session(Storage.RecordedUse(signCount: 6, flagged: true))",
        "synced: used=false live=true login=D2/dave count=0 flagged=false accepted=[D1,D2,D3] → session(Storage.RecordedUse(signCount: 0, flagged: false)); again: used=false live=true login=D2/dave count=0 flagged=false accepted=[D1,D2,D3] → session(Storage.RecordedUse(signCount: 0, flagged: false))",
        "clone warning: used=false live=true login=D2/dave count=0 flagged=false accepted=[D1,D2,D3] → session(Storage.RecordedUse(signCount: 0, flagged: true))",
        "synced, then counting: used=false live=true login=D2/dave count=0 flagged=true accepted=[D1,D2,D3] → session(Storage.RecordedUse(signCount: 1, flagged: true)); back to 0: used=false live=true login=D2/dave count=1 flagged=true accepted=[D1,D2,D3] → conflict(signCountRegression)",
        "credential gone: used=false live=true login=D3/dave count=0 flagged=false accepted=[D1,D2,D3] → notFound, session none; again: not decided → challengeUnusable",
        "refused, flagged: used=false live=true login=D3/dave count=0 flagged=false accepted=[D1,D2,D3] → refused, audit 1",
        "then: used=false live=true login=D3/dave count=0 flagged=true accepted=[D1,D2,D3] → refused",
        "flag of nothing: used=false live=true login=D3/dave count=0 flagged=true accepted=[D1,D2,D3] → refused, audit 1",
        "language: used=false live=true login=D3/dave count=0 flagged=true accepted=[D1,D2,D3] → session(Storage.RecordedUse(signCount: 0, flagged: true)), read fr",
        "browser: used=false live=true login=D1/dave count=6 flagged=true accepted=[D1,D2,D3] → browserSession(Storage.RecordedUse(signCount: 20, flagged: true), ended: []); replacing it: used=false live=true login=D1/dave count=20 flagged=true accepted=[D1,D2,D3] → browserSession(Storage.RecordedUse(signCount: 21, flagged: true), ended: [\"b-1\"]); sessions b-1 ended b-2 live",
        "replacing an app session: used=false live=true login=D1/dave count=21 flagged=true accepted=[D1,D2,D3] → browserSession(Storage.RecordedUse(signCount: 22, flagged: true), ended: []), f-1 live",
        "browser, same counter: used=false live=true login=D1/dave count=22 flagged=true accepted=[D1,D2,D3] → conflict(signCountRegression), b-2 live b-4 none",
        "audit 12, passkeys dave [D1,D2,D3] D1:flagged D2:flagged D3:flagged D1:used D2:used D3:used",
    ]

    /// The options' read (unknown, revoked, live) and the verify's transaction: the challenge used
    /// once (a second verify is not even decided), the counter's compare-and-set under `.reject`
    /// and `.flag`, the session started, a refusal recording the challenge (and its flag), the
    /// language memo, an OP browser session replacing the cookie's. Accounts come from `passkeys`.
    static func loginScript(_ store: some LoginStore, _ passkeys: some PasskeyStore, _ rows: some ContractRows) throws -> [String] {
        var out: [String] = []
        var n = 0
        func challenge(_ expiresAt: Date = Contract.live) -> UsedChallenge {
            n += 1
            return UsedChallenge(id: Array("login-\(n)".utf8), expiresAt: expiresAt)
        }
        let (dave, erin) = (Contract.user("dave"), Contract.user("erin"))
        func register(_ user: UserRecord, new: Bool = false, _ label: String, signCount: Int64 = 0) -> String {
            Contract.outcome({
                try passkeys.finishRegistration(challenge(), .register(NewRegistration(
                    newUser: new ? user : nil, credential: Contract.credential(label, of: user.id, signCount: signCount),
                    session: Contract.session("f-" + label, user: user.id, credential: label),
                    audit: AuditRecord(actor: user.id, action: "passkey.registered", subject: user.id))))
            }, Contract.written)
        }
        func options(_ username: String) throws -> String {
            try store.account(username: username).map { "\($0.userId) \(Contract.labels($0.credentials.map(\.id))) \($0.credentials.map(\.transports))" } ?? "nil"
        }
        func use(_ label: String, _ count: Int64, _ policy: CredentialUse.OnRegression = .reject, clone: Bool = false) -> CredentialUse {
            CredentialUse(credentialId: Contract.id(label), userId: dave.id, signCount: count, backedUp: false, cloneWarning: clone, onRegression: policy)
        }
        let line = AuditRecord(actor: dave.id, action: "login", subject: dave.id)
        /// The login: what `decide` was shown (or that it was not asked), then what the store answered.
        func login(_ c: UsedChallenge, _ label: String, _ decide: LoginWrite) -> String {
            var seen = "not decided"
            let written = Contract.outcome {
                try store.login(c, credentialId: Contract.id(label)) { read in
                    seen = "used=\(read.used) live=\(read.live) login=\(read.login.map { "\(Contract.label($0.credential.id))/\($0.user.username)" } ?? "nil")"
                        + (read.login.map { " count=\($0.credential.signCount) flagged=\($0.credential.flagged)" } ?? "")
                        + " accepted=\(Contract.labels(read.accepted))"
                    return decide
                }
            }
            return "\(seen) → \(written)"
        }
        func session(_ family: String, _ use: CredentialUse, language: String? = nil) -> LoginWrite {
            .session(Contract.session(family, user: dave.id, credential: Contract.label(use.credentialId)), recording: use, audit: [line],
                     events: [], language: language)
        }

        // Options: the account's live passkeys, oldest first.
        out.append("dave: " + register(dave, new: true, "D1", signCount: 5) + ", " + register(dave, "D2") + ", " + register(dave, "D3"))
        out.append("erin: " + register(erin, new: true, "E1"))
        out.append("options: nobody \(try options("nobody")), dave \(try options("dave"))")
        out.append("revoke E1: \(Self.revoked(try passkeys.revokePasskey(userId: erin.id, credentialId: Contract.id("E1"), audit: line, redeeming: nil, keeping: nil, mail: [], revokedEvent: nil, sessionEvent: nil)))")
        out.append("options: erin \(try options("erin"))")

        // The read: an unknown or revoked credential is no login; the refusal records the challenge.
        let c1 = challenge()
        out.append("unknown: " + login(c1, "nobody", .refused(flag: nil)) + "; again: " + login(c1, "nobody", .refused(flag: nil)))
        out.append("revoked: " + login(challenge(), "E1", .refused(flag: nil)))
        out.append("expired: " + login(challenge(Contract.expired), "D1", session("f-x", use("D1", 6))))

        // The write: the challenge's use with the session and the counter's compare-and-set.
        let c2 = challenge()
        out.append("sign in: " + login(c2, "D1", session("f-1", use("D1", 6))) + ", session \(try rows.session("f-1")), audit \(try rows.audit("login"))")
        out.append("same challenge: " + login(c2, "D1", session("f-2", use("D1", 7))) + ", session \(try rows.session("f-2"))")
        let c3 = challenge()
        out.append("same counter: " + login(c3, "D1", session("f-3", use("D1", 6))) + ", session \(try rows.session("f-3")), audit \(try rows.audit("login"))")
        out.append("that challenge again: " + login(c3, "D1", session("f-3", use("D1", 7))))
        out.append("same counter, flag: " + login(challenge(), "D1", session("f-4", use("D1", 6, .flag))) + ", session \(try rows.session("f-4"))")
        out.append("lower counter, flag: " + login(challenge(), "D1", session("f-5", use("D1", 3, .flag))))
        out.append("synced: " + login(challenge(), "D2", session("f-6", use("D2", 0))) + "; again: " + login(challenge(), "D2", session("f-7", use("D2", 0))))
        out.append("clone warning: " + login(challenge(), "D2", session("f-8", use("D2", 0, clone: true))))
        out.append("synced, then counting: " + login(challenge(), "D2", session("f-9", use("D2", 1))) + "; back to 0: "
                   + login(challenge(), "D2", session("f-10", use("D2", 0))))
        let c4 = challenge()
        out.append("credential gone: " + login(c4, "D3", session("f-11", use("nobody", 1))) + ", session \(try rows.session("f-11"))"
                   + "; again: " + login(c4, "D3", .refused(flag: nil)))

        // A refusal with a flag: the challenge and the flag, nothing else.
        let flag = CredentialFlag(credentialId: Contract.id("D3"), audit: AuditRecord(actor: dave.id, action: "passkey.flagged", subject: dave.id), events: [])
        out.append("refused, flagged: " + login(challenge(), "D3", .refused(flag: flag)) + ", audit \(try rows.audit("passkey.flagged"))")
        out.append("then: " + login(challenge(), "D3", .refused(flag: nil)))
        let gone = CredentialFlag(credentialId: Contract.id("nobody"), audit: AuditRecord(actor: dave.id, action: "passkey.flagged", subject: dave.id), events: [])
        out.append("flag of nothing: " + login(challenge(), "D3", .refused(flag: gone)) + ", audit \(try rows.audit("passkey.flagged"))")

        // The language memo rides with the session.
        out.append("language: " + login(challenge(), "D3", session("f-12", use("D3", 0), language: "fr"))
                   + ", read \(try passkeys.registrationRead(challenge(), account: dave.id, username: nil, credentialId: [], digest: [], recoveryId: nil).language ?? "nil")")

        // An OP browser session, and another replacing the first's cookie.
        let b1 = LoginWrite.browserSession(Contract.session("b-1", user: dave.id, credential: "D1", browser: true), recording: use("D1", 20),
                                           replacing: nil, audit: [line], events: [])
        let b2 = LoginWrite.browserSession(Contract.session("b-2", user: dave.id, credential: "D1", browser: true), recording: use("D1", 21),
                                           replacing: Contract.refreshHash("b-1"), audit: [line], events: [])
        let b3 = LoginWrite.browserSession(Contract.session("b-3", user: dave.id, credential: "D1", browser: true), recording: use("D1", 22),
                                           replacing: Contract.refreshHash("f-1"), audit: [line], events: [])
        out.append("browser: " + login(challenge(), "D1", b1) + "; replacing it: " + login(challenge(), "D1", b2)
                   + "; sessions b-1 \(try rows.session("b-1")) b-2 \(try rows.session("b-2"))")
        out.append("replacing an app session: " + login(challenge(), "D1", b3) + ", f-1 \(try rows.session("f-1"))")
        let b4 = LoginWrite.browserSession(Contract.session("b-4", user: dave.id, credential: "D1", browser: true), recording: use("D1", 22),
                                           replacing: Contract.refreshHash("b-2"), audit: [line], events: [])
        out.append("browser, same counter: " + login(challenge(), "D1", b4) + ", b-2 \(try rows.session("b-2")) b-4 \(try rows.session("b-4"))")
        out.append("audit \(try rows.audit("login")), passkeys \(try Self.listed(passkeys, dave.id))")
        return out
    }
}
