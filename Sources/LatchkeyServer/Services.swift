import Crypto
import Foundation
import HTTP
import JSON
import PostgreSQL
import Storage
import Tokens
import WebAuthn

/// The services one server instance runs, wired to one PostgreSQL pool.
public final class Services: Sendable {
    public let configuration: Configuration
    public let store: Store
    public let metrics = Metrics()
    public let tokens: TokenService
    public let origins: OriginCache
    public let passkeys: PasskeyService
    public let stepUp: StepUpService
    public let apps: AppService
    let log: RequestLog

    /// Migrates (under an advisory lock), seeds configured origins, and loads signing keys.
    /// `challengePool`: connections with asynchronous commit for challenge rows (see Store).
    public init(configuration: Configuration, pool: PostgresPool, challengePool: PostgresPool? = nil,
                log: RequestLog = RequestLog(enabled: true)) throws {
        self.configuration = configuration
        store = Store(pool: pool, challengePool: challengePool)
        _ = try Migrator(LatchkeyMigrations.all).migrate(using: pool)
        for origin in configuration.origins { _ = try store.addOrigin(origin, source: "config", actor: "latchkey") }
        tokens = TokenService(store: store, configuration: configuration)
        try tokens.prepareKeys()
        origins = OriginCache(store: store)
        passkeys = try PasskeyService(store: store, configuration: configuration, tokens: tokens, origins: origins, metrics: metrics)
        stepUp = StepUpService(store: store, configuration: configuration, tokens: tokens, passkeys: passkeys)
        apps = AppService(store: store, configuration: configuration, origins: origins)
        self.log = log
    }

    // MARK: Who is asking

    static func credentials(_ request: Request, scheme: String) -> String? {
        guard let header = request.header("Authorization") else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == scheme.lowercased() else { return nil }
        return String(parts[1]).trimmed
    }

    /// The signed-in user (Bearer access token) or, where allowed, the user an enrolment ticket
    /// vouches for; nil when the request carries no Authorization at all.
    func authenticate(_ request: Request, allowTicket: Bool) throws(ServiceError) -> String? {
        guard request.header("Authorization") != nil else { return nil }
        if Services.credentials(request, scheme: "Bearer") != nil { return try requireUser(request) }
        if allowTicket, let ticket = Services.credentials(request, scheme: "Ticket") {
            guard let userId = try db({ try store.consumeTicket(hash: OpaqueToken.hash(ticket)) }) else {
                throw ServiceError("unauthorized", "the enrolment ticket is unknown, expired or used")
            }
            return userId
        }
        throw ServiceError.unauthorized
    }

    func requireUser(_ request: Request) throws(ServiceError) -> String {
        guard let token = Services.credentials(request, scheme: "Bearer"),
              let sub = try tokens.verify(token)["sub"]?.stringValue else { throw ServiceError.unauthorized }
        return sub
    }

    /// Admin routes take the admin key as a bearer credential (compared in constant time against
    /// its hash). A valid user token there is 403, anything else 401.
    func requireAdmin(_ request: Request) throws(ServiceError) {
        guard let presented = Services.credentials(request, scheme: "Bearer") else { throw ServiceError.unauthorized }
        if let hash = configuration.adminKeyHash, AdminKey.matches(presented, hash: hash) { return }
        if (try? tokens.verify(presented)) != nil { throw ServiceError("forbidden", "this token does not grant admin access") }
        if configuration.adminKeyHash == nil { throw ServiceError("forbidden", "the admin API is off (LATCHKEY_ADMIN_KEY is not set)") }
        throw ServiceError.unauthorized
    }

    // MARK: Tokens

    func refresh(_ token: String) throws(ServiceError) -> TokenService.Issued {
        let (next, nextHash) = TokenService.newRefreshToken()
        let outcome = try db { try store.rotateRefreshToken(hash: OpaqueToken.hash(token), newHash: nextHash, ttlSeconds: configuration.refreshTokenTTL) }
        switch outcome {
        case .rotated(let userId, let familyId):
            return try tokens.issue(userId: userId, familyId: familyId, refreshToken: next, userVerified: false)
        case .reused:
            throw ServiceError("invalid_grant", "refresh token reuse detected: the session is revoked")
        case .invalid:
            throw ServiceError("invalid_grant", "the refresh token is invalid, expired or revoked")
        }
    }

    func logout(_ request: Request) throws(ServiceError) {
        guard let token = Services.credentials(request, scheme: "Bearer") else { throw ServiceError.unauthorized }
        let claims = try tokens.verify(token)
        guard let sub = claims["sub"]?.stringValue else { throw ServiceError.unauthorized }
        try db { try store.revokeRefreshFamilies(userId: sub, familyId: claims["sid"]?.stringValue) }
    }

    // MARK: Well-known

    func wellKnown(_ name: String) throws(ServiceError) -> Response {
        // A file kept in LATCHKEY_WELLKNOWN_DIR wins; otherwise the one built from the declared apps.
        let path = configuration.wellKnownDirectory + "/" + name
        var bytes = FileManager.default.contents(atPath: path).map { [UInt8]($0) }
        if bytes == nil { bytes = try apps.builtFile(name) }
        guard let bytes else { throw ServiceError.notFound(name) }
        return .json(bytes: bytes, headers: [("Cache-Control", "public, max-age=300")])
    }

    // MARK: Admin

    func listOrigins() throws(ServiceError) -> JSONValue {
        .object([("origins", .array(try db { try store.origins() }.map { .object([("origin", .string($0.origin)), ("source", .string($0.source))]) }))])
    }

    func addOrigin(_ body: JSONValue) throws(ServiceError) -> (String, Bool) {
        let candidate: String
        if let fingerprint = body["androidFingerprint"]?.stringValue {
            switch OriginRules.androidOrigin(fromFingerprint: fingerprint) {
            case .success(let o): candidate = o
            case .failure(let e): throw ServiceError.invalid(e.reason)
            }
        } else if let origin = body["origin"]?.stringValue {
            candidate = origin
        } else {
            throw ServiceError.invalid("origin or androidFingerprint is required")
        }
        let origin: String
        switch OriginRules.validate(candidate, developmentMode: configuration.developmentMode) {
        case .success(let o): origin = o
        case .failure(let e): throw ServiceError.invalid(e.reason)
        }
        let created = try db { try store.addOrigin(origin, source: "admin", actor: "admin") }
        origins.invalidate()
        return (origin, created)
    }

    func removeOrigin(_ origin: String) throws(ServiceError) {
        guard try db({ try store.removeOrigin(origin, actor: "admin") }) else { throw ServiceError.notFound("origin") }
        origins.invalidate()
    }

    func enrolmentTicket(externalId: String, body: JSONValue) throws(ServiceError) -> JSONValue {
        guard !externalId.isEmpty, externalId.count <= 128 else { throw ServiceError.invalid("externalId must be 1 to 128 characters") }
        guard let username = body["username"]?.stringValue else { throw ServiceError.invalid("username is required") }
        let displayName = body["displayName"]?.stringValue ?? username
        try validateName(username, "username")
        try validateName(displayName, "displayName")
        let candidate = UserRecord(id: Base64URL.encode(SecureRandom.bytes(16)), userHandle: SecureRandom.bytes(32),
                                   username: username, displayName: displayName)
        let user: UserRecord
        do {
            user = try store.upsertExternalUser(externalId: externalId, candidate: candidate).0
        } catch let e as PostgresError where e.isUniqueViolation {
            throw ServiceError("conflict", "that username is taken")
        } catch {
            throw ServiceError("internal_error", "storage unavailable")
        }
        let ticket = OpaqueToken.generate(prefix: "lkt_")
        let expires = try db { try store.createTicket(hash: OpaqueToken.hash(ticket), userId: user.id, ttlSeconds: 600, actor: "admin") }
        return .object([("ticket", .string(ticket)), ("expiresAt", .string(iso8601(expires))), ("userId", .string(user.id))])
    }

    func auditLog(limit: String?, before: String?) throws(ServiceError) -> JSONValue {
        let n = min(max(Int(limit ?? "100") ?? 100, 1), 1000)
        let cursor = before.flatMap { Int64($0) }
        let entries = try db { try store.auditEntries(limit: n, before: cursor) }
        return .object([("entries", .array(entries.map { e in
            .object([("id", .number(Double(e.id))), ("at", .string(iso8601(e.at))), ("actor", .string(e.actor)),
                     ("action", .string(e.action)), ("subject", e.subject.map { .string($0) } ?? .null),
                     ("detail", (try? JSONParser.parse(e.detail)) ?? .object([]))])
        }))])
    }
}

/// One JSON line per request on standard output: no bodies, no tokens, no credential data.
public struct RequestLog: Sendable {
    let enabled: Bool
    public init(enabled: Bool) { self.enabled = enabled }

    func write(request: Request, route: String, status: Int, seconds: Double) {
        guard enabled else { return }
        var line = JSONValue.object([
            ("time", .string(iso8601(Date()))), ("method", .string(request.method)), ("route", .string(route)),
            ("status", .number(Double(status))), ("ms", .number((seconds * 100_000).rounded() / 100)),
            ("remote", request.remoteAddress.map { .string($0) } ?? .null),
        ]).serialized()
        line.append(0x0A)
        _ = line.withUnsafeBufferPointer { Foundation.write(1, $0.baseAddress, $0.count) }
    }
}
