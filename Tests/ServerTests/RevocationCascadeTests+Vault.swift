import Crypto
import Foundation
import HTTP
import JSON
import PostgreSQL
import Storage
import Testing
import WebAuthnTesting
@testable import LatchkeyServer

extension RevocationCascadeTests {
    /// The vault's wraps of an account, by credential id.
    static func wraps(userId: String) throws -> [[UInt8]] {
        try TestDatabase.connect().query("SELECT credential_id FROM vault_wrapped_keys WHERE user_id = \(userId) ORDER BY credential_id")
            .map { try $0.bytes("credential_id") }
    }

    @Test("a revoked passkey's vault wrap dies in the revoking statement, by its owner or by an admin; the others' stand")
    func vaultWrapDiesWithItsPasskey() throws {
        let server = try TestServer(name: "cascade-vault")
        defer { server.http.stop() }
        let client = server.client()
        let first = SoftAuthenticator(), second = SoftAuthenticator(), third = SoftAuthenticator()
        let ana = try client.signUp(first, username: server.username("vault"))
        for added in [second, third] {
            let (_, reply) = try client.register(added, authorization: ana.bearer, approver: first)
            #expect(reply.status == 201, "\(reply)")
        }
        #expect(try client.send("PUT", "/v1/vault", body: JSONValue.object([("prfSalt", .string(Base64URL.encode(SecureRandom.bytes(32))))])
            .serialized(), authorization: ana.bearer).status == 201)
        for a in [first, second, third] {
            let id = Base64URL.encode(a.credentialId)
            let token = try client.stepUpToken(a, authorization: ana.bearer, action: .object([("type", "latchkey.vault.wrap"), ("credentialId", .string(id))]))
            let r = try client.send("PUT", "/v1/vault/wrapped/\(id)", body: JSONValue.object([("wrappedKey", .string(Base64URL.encode(SecureRandom.bytes(60))))])
                .serialized(), authorization: ana.bearer, headers: [("Latchkey-Step-Up", token)])
            #expect(r.status == 204, "\(r)")
        }
        let all = [first, second, third].map(\.credentialId).sorted { $0.lexicographicallyPrecedes($1) }
        #expect(try Self.wraps(userId: ana.userId) == all)

        // Its owner revokes the first (from the second's session): one wrap fewer, the first's.
        let bySecond = try client.signIn(second)
        #expect(try client.revokePasskey(first.credentialId, authorization: bySecond.bearer, approver: second).status == 200)
        #expect(try Self.wraps(userId: ana.userId) == all.filter { $0 != first.credentialId })
        // An admin revokes the third with the admin key: its wrap goes too.
        let admin = try client.send("DELETE", "/admin/v1/users/\(ana.userId)/passkeys/\(Base64URL.encode(third.credentialId))",
                                    authorization: "Bearer \(server.adminKey)")
        #expect(admin.status == 200 || admin.status == 204, "\(admin)")
        #expect(try Self.wraps(userId: ana.userId) == [second.credentialId])
        // The vault itself, and the remaining wrap, stand.
        let read = try #require(try client.get("/v1/vault", authorization: bySecond.bearer).json)
        #expect(read["wrapped"]?.arrayValue?.compactMap { $0["credentialId"]?.stringValue } == [Base64URL.encode(second.credentialId)])
    }

    @Test("under LATCHKEY_RECOVERY_REVOKES=all a completed recovery revokes the old passkeys, and their wraps with them")
    func recoveryRevokesTheWraps() throws {
        let server = try TestServer(name: "cascade-vault-recovery") { $0.recoveryDelay = 0; $0.recoveryRevokesPasskeys = true }
        defer { server.http.stop() }
        let client = server.client()
        let old = SoftAuthenticator(), fresh = SoftAuthenticator()
        let username = server.username("vault")
        let ana = try client.signUp(old, username: username)
        #expect(try client.send("PUT", "/v1/vault", body: JSONValue.object([("prfSalt", .string(Base64URL.encode(SecureRandom.bytes(32))))])
            .serialized(), authorization: ana.bearer).status == 201)
        let id = Base64URL.encode(old.credentialId)
        let wrapToken = try client.stepUpToken(old, authorization: ana.bearer, action: .object([("type", "latchkey.vault.wrap"), ("credentialId", .string(id))]))
        #expect(try client.send("PUT", "/v1/vault/wrapped/\(id)", body: JSONValue.object([("wrappedKey", .string(Base64URL.encode(SecureRandom.bytes(60))))])
            .serialized(), authorization: ana.bearer, headers: [("Latchkey-Step-Up", wrapToken)]).status == 204)
        #expect(try Self.wraps(userId: ana.userId) == [old.credentialId])
        let codesToken = try client.stepUpToken(old, authorization: ana.bearer, action: .object([("type", "latchkey.recovery-codes.create")]))
        let code = try #require(try client.post("/v1/recovery-codes", .object([]), authorization: ana.bearer,
                                                headers: [("Latchkey-Step-Up", codesToken)]).json?["codes"]?.arrayValue?.first?.stringValue)
        let recovery = try client.post("/v1/recovery/verify", .object([("username", .string(username)), ("recoveryCode", .string(code))]))
        let token = try #require(recovery.json?["recoveryToken"]?.stringValue, "\(recovery)")
        let (_, registered) = try client.register(fresh, authorization: "Bearer \(token)")
        #expect(registered.status == 201, "\(registered)")
        #expect(try Self.wraps(userId: ana.userId).isEmpty)
        let revoked = try TestDatabase.connect().query("SELECT revoked_at IS NOT NULL AS gone FROM credentials WHERE id = \(old.credentialId)")
        #expect(try revoked[0].bool("gone"))
    }
}
