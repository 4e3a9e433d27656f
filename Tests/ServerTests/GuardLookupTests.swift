import Crypto
import DeviceKeys
import Foundation
import HTTP
import JSON
@testable import LatchkeyServer
@testable import Storage
import Synchronization
import Testing
import Tokens

/// A route's guard looks up only through `GuardLookups`, and a lookup that fails fails the request
/// (503, the handler never runs): it is never taken for "allowed" or "no step-up needed". What the
/// guard read reaches the handler, which does not read it again. Routes here are built on a route
/// table over test lookups: no socket, no PostgreSQL.
@Suite("Route guards: lookups that fail, reads handed on")
struct GuardLookupTests {
    static let requestId = "lkq_" + Base64URL.encode([UInt8](repeating: 7, count: 32))
    static let client = OAuthClientRecord(id: "lkc_" + Base64URL.encode([UInt8](repeating: 3, count: 16)), name: "Example",
                                          secretHash: nil, redirectURIs: ["https://rp.example.test/cb"])
    static let plainRequest = OAuthRequestRecord(clientId: client.id, params: .object([("scope", "openid")]), createdAt: Date(timeIntervalSince1970: 0))

    static let approver = SessionService.Caller(userId: "user-1", sessionId: "session-1", acr: AuthenticationClaims.passkeyVerified.acr,
                                                standing: SessionService.Standing(method: .passkey, credentialId: [1], heldUntil: nil))

    /// One route on a table over `lookups`, whose handler records that it ran and what the guard handed it.
    final class Probe: Sendable {
        let ran = Mutex<[GuardLoads]>([])
        var runs: Int { ran.withLock { $0.count } }
        var handed: AuthorizationRequestRead? { ran.withLock { $0.last?.authorizationRequest } }
    }

    static func route(_ method: String, _ pattern: String, _ access: Access, stepUp: StepUpRule?, lookups: TestLookups,
                      accepting: AcceptedBody = .json,
                      preload: (@Sendable (Request, PathParameters) -> GuardPreload?)? = nil) -> (Router, Probe) {
        var table = RouteTable(lookups: lookups)
        let probe = Probe()
        table.add(method, pattern, access, stepUp: stepUp, accepting: accepting, preload: preload) { ctx in
            probe.ran.withLock { $0.append(ctx.loads) }
            return .empty(status: 204)
        }
        return (table.router, probe)
    }

    static func send(_ router: Router, _ method: String, _ target: String, body: JSONValue? = nil,
                     headers: [(String, String)] = []) -> Response {
        let json: [(String, String)] = body == nil ? [] : [("Content-Type", "application/json")]
        return router.dispatch(Request(method: method, target: target, headers: headers + json, body: body?.serialized() ?? [])).response
    }

    /// 503 `internal_error`: the database could not answer.
    static func isUnavailable(_ response: Response) throws -> Bool {
        guard response.status == 503 else { return false }
        return (try JSONParser.parse(response.body))["code"]?.stringValue == "internal_error"
    }

    static var approve: String { "/v1/oauth/requests/\(requestId)/approve" }

    @Test("the approval's step-up rule: a failing read of the request or its client is 503, never \"no step-up needed\"")
    func approvalLookupFails() throws {
        for failing in [TestLookups.Lookup.pendingAuthorization, .client] {
            let lookups = TestLookups(caller: .session(Self.approver), pending: Self.plainRequest, failing: failing)
            let (router, probe) = Self.route("POST", "/v1/oauth/requests/{id:oauthRequest}/approve", .approver, stepUp: .oauthAuthorization,
                                             lookups: lookups, accepting: .any)
            let response = Self.send(router, "POST", Self.approve, headers: [("Authorization", "Bearer token")])
            #expect(try Self.isUnavailable(response), "\(failing): \(response.status)")
            #expect(probe.runs == 0, "\(failing): the handler ran")
            #expect(lookups.asked.contains(failing))
        }
    }

    @Test("every other lookup a guard makes fails the request the same way")
    func everyLookupFails() throws {
        // The caller's resolution itself.
        let resolution = TestLookups(caller: .session(Self.approver), failing: .caller)
        let (sessionRoute, sessionProbe) = Self.route("GET", "/v1/account", .session, stepUp: nil, lookups: resolution, accepting: .any)
        #expect(try Self.isUnavailable(Self.send(sessionRoute, "GET", "/v1/account", headers: [("Authorization", "Bearer token")])))
        #expect(sessionProbe.runs == 0)

        // A session's standing (does adding a passkey need a step-up?).
        let plainSession = SessionService.Caller(userId: "user-1", sessionId: "session-1")
        let standing = TestLookups(caller: .session(plainSession), failing: .standing)
        let (addition, additionProbe) = Self.route("POST", "/v1/passkeys/registration/options", .registration, stepUp: .passkeyAddition,
                                                   lookups: standing)
        #expect(try Self.isUnavailable(Self.send(addition, "POST", "/v1/passkeys/registration/options", body: .object([]))))
        #expect(additionProbe.runs == 0)
        #expect(standing.asked == [.caller, .standing])

        // Whether the account has a passkey (does an address change need a step-up?).
        let passkeys = TestLookups(caller: .session(plainSession), failing: .addressChange)
        let (email, emailProbe) = Self.route("PUT", "/v1/account/email", .session, stepUp: .emailChange, lookups: passkeys)
        #expect(try Self.isUnavailable(Self.send(email, "PUT", "/v1/account/email", body: .object([("email", "someone@latchkey.test")]))))
        #expect(emailProbe.runs == 0)
        #expect(passkeys.asked == [.caller, .addressChange])

        // The last-way-in check before a revocation's step-up.
        let lastWayIn = TestLookups(caller: .session(plainSession), failing: .lastWayIn)
        let (revoke, revokeProbe) = Self.route("DELETE", "/v1/passkeys/{id:credential}", .session, stepUp: .passkeyRevocation,
                                               lookups: lastWayIn, accepting: .any)
        #expect(try Self.isUnavailable(Self.send(revoke, "DELETE", "/v1/passkeys/" + Base64URL.encode([9, 9, 9, 9]))))
        #expect(revokeProbe.runs == 0)

        // The step-up presented for the change.
        let stepUp = TestLookups(caller: .session(Self.approver), pending: Self.plainRequest, failing: .stepUp)
        let (approval, approvalProbe) = Self.route("POST", "/v1/oauth/requests/{id:oauthRequest}/approve", .approver,
                                                   stepUp: .oauthAuthorization, lookups: stepUp, accepting: .any)
        #expect(try Self.isUnavailable(Self.send(approval, "POST", Self.approve,
                                                  headers: [("Authorization", "Bearer token"), ("Latchkey-Step-Up", "step-up")])))
        #expect(approvalProbe.runs == 0)
        #expect(stepUp.asked == [.caller, .pendingAuthorization, .client, .stepUp])
    }

    @Test("a route's preload is asked of the caller's resolution itself: its failure is 503 and the handler never runs")
    func preloadRidesWithTheCaller() throws {
        let preload: @Sendable (Request, PathParameters) -> GuardPreload? = { _, raw in
            raw["id"].flatMap(PathKind.opaque.parse).flatMap { if case .text(let id) = $0 { .adminPage(.userPage(id: id)) } else { nil } }
        }
        let id = "AAAAAAAAAAAAAAAAAAAAAA"
        let answering = TestLookups(caller: .adminKey)
        let (router, probe) = Self.route("GET", "/admin/v1/users/{id:opaque}", .admin, stepUp: nil, lookups: answering, accepting: .any,
                                         preload: preload)
        #expect(Self.send(router, "GET", "/admin/v1/users/\(id)", headers: [("Authorization", "Bearer key")]).status == 204)
        // An id that cannot be one is preloaded by nothing, and is the path check's 404.
        #expect(Self.send(router, "GET", "/admin/v1/users/short", headers: [("Authorization", "Bearer key")]).status == 404)
        #expect(answering.preloaded == [.adminPage(.userPage(id: id)), nil] && probe.runs == 1)
        let failing = TestLookups(caller: .adminKey, failing: .caller)
        let (down, downProbe) = Self.route("GET", "/admin/v1/users/{id:opaque}", .admin, stepUp: nil, lookups: failing, accepting: .any,
                                           preload: preload)
        #expect(try Self.isUnavailable(Self.send(down, "GET", "/admin/v1/users/\(id)", headers: [("Authorization", "Bearer key")])))
        #expect(failing.preloaded == [.adminPage(.userPage(id: id))] && downProbe.runs == 0)
    }

    @Test("a lookup that answers still decides: a Bearer approval without its step-up is 403 step_up_required")
    func bearerApprovalNeedsStepUp() throws {
        let lookups = TestLookups(caller: .session(Self.approver), pending: Self.plainRequest)
        let (router, probe) = Self.route("POST", "/v1/oauth/requests/{id:oauthRequest}/approve", .approver, stepUp: .oauthAuthorization,
                                         lookups: lookups, accepting: .any)
        let response = Self.send(router, "POST", Self.approve, headers: [("Authorization", "Bearer token")])
        #expect(response.status == 403)
        #expect((try JSONParser.parse(response.body))["code"]?.stringValue == "step_up_required")
        #expect(probe.runs == 0)
    }

    @Test("the request the approval's guard read is handed to the handler, which reads it no more")
    func approvalReadHandedOn() throws {
        // Read by the step-up rule (the cookie alone approves a plain sign-in: no step-up needed).
        let ruleRead = TestLookups(caller: .browser(Self.approver), pending: Self.plainRequest)
        let (router, probe) = Self.route("POST", "/v1/oauth/requests/{id:oauthRequest}/approve", .approver, stepUp: .oauthAuthorization,
                                         lookups: ruleRead, accepting: .any)
        #expect(Self.send(router, "POST", Self.approve).status == 204)
        #expect(probe.handed?.id == Self.requestId)
        #expect(probe.handed?.record?.clientId == Self.client.id)
        #expect(ruleRead.asked == [.caller, .pendingAuthorization, .client])

        // Read with the caller's session (one query): the rule takes that read, and reads nothing itself.
        let preloaded = TestLookups(caller: .browser(Self.approver), pending: Self.plainRequest, preloads: true)
        let (again, againProbe) = Self.route("POST", "/v1/oauth/requests/{id:oauthRequest}/approve", .approver, stepUp: .oauthAuthorization,
                                             lookups: preloaded, accepting: .any)
        #expect(Self.send(again, "POST", Self.approve).status == 204)
        #expect(againProbe.handed?.record?.clientId == Self.client.id)
        #expect(preloaded.asked == [.caller, .client])

        // No such pending request: no step-up to ask for; the handler gets the read (nothing) and says 404.
        let unknown = TestLookups(caller: .session(Self.approver), pending: nil)
        let (missing, missingProbe) = Self.route("POST", "/v1/oauth/requests/{id:oauthRequest}/approve", .approver, stepUp: .oauthAuthorization,
                                                 lookups: unknown, accepting: .any)
        #expect(Self.send(missing, "POST", Self.approve, headers: [("Authorization", "Bearer token")]).status == 204)
        #expect(missingProbe.handed?.id == Self.requestId)
        #expect(missingProbe.handed?.record == nil)
        #expect(unknown.asked == [.caller, .pendingAuthorization])

        // An id that cannot be one is the path check's 404, before any read.
        let malformed = TestLookups(caller: .session(Self.approver), pending: Self.plainRequest)
        let (bad, badProbe) = Self.route("POST", "/v1/oauth/requests/{id:oauthRequest}/approve", .approver, stepUp: .oauthAuthorization,
                                         lookups: malformed, accepting: .any)
        #expect(Self.send(bad, "POST", "/v1/oauth/requests/lkq_short/approve", headers: [("Authorization", "Bearer token")]).status == 404)
        #expect(badProbe.runs == 0)
        #expect(malformed.asked == [.caller])
    }
}

/// Guard lookups with fixed answers; `failing` throws what a database that cannot answer throws.
final class TestLookups: GuardLookups {
    enum Lookup: Sendable, Equatable { case caller, standing, addressChange, lastWayIn, pendingAuthorization, client, stepUp }

    let resolved: RouteCaller
    let pending: OAuthRequestRecord?
    /// The caller's resolution reads the route's authorization request with the session.
    let preloads: Bool
    let failing: Lookup?
    private let calls = Mutex<[Lookup]>([])
    var asked: [Lookup] { calls.withLock { $0 } }

    init(caller: RouteCaller, pending: OAuthRequestRecord? = nil, preloads: Bool = false, failing: Lookup? = nil) {
        resolved = caller
        self.pending = pending
        self.preloads = preloads
        self.failing = failing
    }

    private let preloads_ = Mutex<[GuardPreload?]>([])
    /// What each caller resolution was asked to read with the caller.
    var preloaded: [GuardPreload?] { preloads_.withLock { $0 } }

    private func look(_ lookup: Lookup) throws(ServiceError) {
        calls.withLock { $0.append(lookup) }
        if failing == lookup { throw ServiceError(StorageError.unavailable("connection refused")) }
    }

    func caller(_ access: Access, _ request: Request, preload: GuardPreload?, loads: inout GuardLoads) throws(ServiceError) -> RouteCaller {
        preloads_.withLock { $0.append(preload) }
        try look(.caller)
        if preloads, let requestId = preload?.authorizationRequestId {
            loads.authorizationRequest = AuthorizationRequestRead(id: requestId, record: pending)
        }
        return resolved
    }

    func standing(_ caller: SessionService.Caller) throws(ServiceError) -> SessionService.Standing {
        try look(.standing)
        return SessionService.Standing(method: .passkey, credentialId: [1], heldUntil: nil)
    }

    func addressChange(userId: String) throws(ServiceError) -> AddressChangeAccount {
        try look(.addressChange)
        return AddressChangeAccount(hasPasskeys: true, language: nil)
    }

    func refuseLastWayIn(_ loaded: LoadedRevocation) throws(ServiceError) -> LoadedRevocation { loaded }

    func refuseLastWayIn(userId: String, credentialId: [UInt8]) throws(ServiceError) -> LoadedRevocation {
        try look(.lastWayIn)
        return LoadedRevocation(userId: userId, credentialId: credentialId, read: PasskeyRevocationRead(
            ways: WaysIn(known: true, otherPasskey: true, recoveryCode: false, verifiedAddress: false), email: nil, language: nil))
    }

    func pendingAuthorization(id: String) throws(ServiceError) -> OAuthRequestRecord? {
        try look(.pendingAuthorization)
        return pending
    }

    func client(id: String) throws(ServiceError) -> OAuthClientRecord? {
        try look(.client)
        return id == GuardLookupTests.client.id ? GuardLookupTests.client : nil
    }

    func checkedStepUp(_ token: String, userId: String, action: StepUpAction, changes: String, deviceKeyAllowed: Bool,
                       session: String?) throws(ServiceError) -> (jti: String, receiptId: String, authentication: AuthenticationClaims) {
        try look(.stepUp)
        throw StepUpService.stepUpRequired("not a step-up this test made")
    }
}
