import Crypto
import Foundation
import HTTP
import JSON
import LatchkeyServer
import PostgreSQL
import PostgreSQLTesting
import Storage
import Synchronization
import Testing
import WebAuthn
import WebAuthnTesting

/// The database the server tests use (`TestCluster`: `DATABASE_URL`, else the throwaway test cluster).
enum TestDatabase {
    static func url() throws -> String { try TestCluster.url() }
    static let repositoryRoot = TestCluster.repositoryRoot

    /// A connection of the test's own to `url` (default: the shared test database). Through PgBouncer
    /// in transaction pooling (`LATCHKEY_DB_POOLER=transaction`) it prepares nothing: a named
    /// statement prepared on one pooled server session is unknown to the next.
    static func connect(_ url: String? = nil) throws -> PostgresConnection {
        let pooled = ProcessInfo.processInfo.environment["LATCHKEY_DB_POOLER"].flatMap(PoolerMode.init(rawValue:)) == .transaction
        return try PostgresConnection(url: try url ?? Self.url(), transactionPooling: pooled)
    }
}

extension TestDatabase {
    /// The key-encryption key every test server on the shared test database seals its signing keys
    /// under (they share one `signing_keys` table, so they must agree).
    static let keyEncryptionKeyText = "bGF0Y2hrZXktdGVzdC1rZWstMzItYnl0ZXMtLS0tLS0="
    static let keyEncryptionKey = try! KeyEncryptionKey.parse(keyEncryptionKeyText, name: "test KEK", readFile: { _ in nil })

    /// A database of its own on the test server (dropped on deinit), for tests that change every
    /// signing key (re-encryption) or need a table nobody else writes.
    final class Scratch: Sendable {
        let name: String
        let url: String
        private let serverURL: String

        init() throws {
            let server = try TestDatabase.url()
            let name = "lk_server_\(uniqueSuffix())"
            try PostgresConnection(url: server).execute(SQL(unsafeRaw: "CREATE DATABASE \(name)"))
            let query = server.firstIndex(of: "?").map { String(server[$0...]) } ?? ""
            let base = String(server.dropLast(query.count))
            guard let slash = base.lastIndex(of: "/") else { throw TestSetupError("DATABASE_URL must be a postgresql:// URL") }
            serverURL = server
            self.name = name
            url = String(base[...slash]) + name + query
        }

        func connect() throws -> PostgresConnection { try PostgresConnection(url: url) }

        deinit {
            if let admin = try? PostgresConnection(url: serverURL) {
                _ = try? admin.execute(SQL(unsafeRaw: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"))
            }
        }
    }
}

/// A short random suffix so that every suite has its own rpId, origin and usernames.
func uniqueSuffix() -> String { String(UInt64.random(in: 0...UInt64.max), radix: 36) }

/// One Latchkey server in this process: Configuration + Services + HTTPServer on 127.0.0.1, port 0,
/// with its own rpId (and so its own origin `https://<rpId>`), backed by the test database.
final class TestServer: Sendable {
    let rpId: String
    let origin: String
    let adminKey: String
    let configuration: Configuration
    let services: Services
    let database: Database
    let http: HTTPServer
    var port: Int { http.port }

    /// The statements of each request, when the server was made `tracing` (else nil).
    let traces: StatementTraces?

    /// `rpIdOverride`: another instance of the same deployment (one rpId, one origin). `tracing`:
    /// every request's statements are kept in `traces`.
    init(name: String, rpIdOverride: String? = nil, runtime: Runtime = .system, tracing: Bool = false,
         configure: (inout Configuration) -> Void = { _ in }) throws {
        rpId = rpIdOverride ?? "\(name)-\(uniqueSuffix()).latchkey.test"
        origin = "https://\(rpId)"
        adminKey = "admin-\(uniqueSuffix())-\(uniqueSuffix())"
        var c = Configuration()
        c.rpId = rpId
        c.origins = [origin]
        c.issuer = origin
        c.databaseURL = try TestDatabase.url()
        c.adminKeyHash = AdminKey.hash(adminKey)
        // Every test server in this process shares one database, so they share one key-encryption key
        // (SPEC: one deployment, one configuration); only webhook suites turn their senders on.
        c.keyEncryptionKey = TestDatabase.keyEncryptionKey
        c.outboxSenders = 0
        // The transparency log's writer runs only where a suite asks for it (a database of its own).
        c.logInterval = 0
        // Every suite's requests come from 127.0.0.1 to one shared database, where SPEC's per-address
        // limits (30 authorization requests a minute) would add them all up: each deployment's
        // clients say they are a browser of its own (`clientAddress`, behind a trusted proxy).
        c.trustProxy = true
        // LATCHKEY_DB_POOLER=transaction: the suites run through PgBouncer in transaction pooling (scripts/test.sh).
        if let mode = ProcessInfo.processInfo.environment["LATCHKEY_DB_POOLER"].flatMap(PoolerMode.init(rawValue:)) {
            c.databasePooler = mode
        }
        // LATCHKEY_TEST_EVENT_LOOPS=N: the suites' servers answer sign-ins on N event loops (scripts/test.sh).
        if let loops = ProcessInfo.processInfo.environment["LATCHKEY_TEST_EVENT_LOOPS"].flatMap(Int.init) { c.eventLoops = loops }
        configure(&c)
        configuration = c
        database = Database(url: c.databaseURL, connections: 6, pooler: c.databasePooler, listenURL: c.databaseListenURL)
        services = Services(configuration: c, database: database, runtime: runtime, log: RequestLog(enabled: false))
        try services.start()
        let traces = tracing ? StatementTraces() : nil
        self.traces = traces
        http = try HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threadPoolSize: 2, connectionTimeoutSeconds: 30,
                                                   connectionLimit: 256, maxBodyBytes: c.maxBody,
                                                   largeBodies: Application.largeBodies(c), eventLoops: c.eventLoops),
                              responder: Self.application(services, traces: traces))
    }

    /// The server's responder; with `LATCHKEY_ROUND_TRIP_LOG`, each request's round trips are
    /// logged; with `traces`, each request's statements are kept there.
    static func application(_ services: Services, traces: StatementTraces? = nil) -> Application {
        var application = Application(services: services)
        let log = RoundTripLog.shared
        if let traces {
            application.traceStatements = true
            application.databaseWork = { route, method, status, work in
                log?.record(route: route, method: method, status: status, work: work)
                traces.record(route: "\(method) \(route)", work)
            }
        } else if let log {
            application.databaseWork = log.record
        }
        return application
    }

    /// The test deployment's LATCHKEY_KEY_ENCRYPTION_KEY as the environment gives it (processes spawned by tests).
    static var keyEncryptionKeyBase64: String { TestDatabase.keyEncryptionKeyText }

    /// The address this deployment's clients send as `X-Forwarded-For` (one per rpId: every
    /// instance of a deployment sees the same browser), a private one derived from the rpId.
    var clientAddress: String {
        let h = Digest.sha256(Array(rpId.utf8))
        return "10.\(h[0]).\(h[1]).\(max(h[2], 1))"
    }

    var endpoint: Endpoint { Endpoint(port: port, rpId: rpId, origin: origin, adminKey: adminKey, forwardedFor: clientAddress) }
    func client() -> Client { Client(endpoint) }

    /// A fresh username for this server's tests.
    func username(_ prefix: String = "user") -> String { "\(prefix)-\(uniqueSuffix())" }
}

/// Where a server listens and what it expects from clients.
struct Endpoint: Sendable {
    var host = "127.0.0.1"
    let port: Int
    let rpId: String
    let origin: String
    let adminKey: String?
    /// Sent as `X-Forwarded-For` when the request carries none (a `TestServer`'s clients).
    var forwardedFor: String? = nil
}

/// A response, with its body parsed as JSON when it is JSON.
struct Reply: CustomStringConvertible {
    let status: Int
    let headers: [(String, String)]
    let body: [UInt8]

    func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
    var json: JSONValue? { try? JSONParser.parse(body) }
    var text: String { String(decoding: body, as: UTF8.self) }
    /// The problem document's `code`.
    var code: String? { json?["code"]?.stringValue }
    var contentType: String? { header("Content-Type") }
    var isProblem: Bool { contentType?.hasPrefix("application/problem+json") == true }
    var description: String { "\(status) \(text.prefix(400))" }
}

/// A signed-in (or just registered) account as the server described it.
struct Session {
    let reply: JSONValue
    var user: JSONValue { reply["user"] ?? .null }
    var passkey: JSONValue { reply["passkey"] ?? .null }
    var userId: String { user["id"]?.stringValue ?? "" }
    var accessToken: String { reply["tokens"]?["access_token"]?.stringValue ?? "" }
    var refreshToken: String { reply["tokens"]?["refresh_token"]?.stringValue ?? "" }
    var bearer: String { "Bearer \(accessToken)" }
}

/// Speaks Latchkey's HTTP contract over one keep-alive connection (one client per thread).
final class Client {
    let endpoint: Endpoint
    let http: HTTPClient

    init(_ endpoint: Endpoint) {
        self.endpoint = endpoint
        http = HTTPClient(host: endpoint.host, port: endpoint.port, timeoutSeconds: 30)
    }

    @discardableResult
    func send(_ method: String, _ path: String, body: [UInt8] = [], contentType: String? = "application/json",
              authorization: String? = nil, headers extra: [(String, String)] = []) throws -> Reply {
        var headers = extra
        if let address = endpoint.forwardedFor, !headers.contains(where: { $0.0.lowercased() == "x-forwarded-for" }) {
            headers.append(("X-Forwarded-For", address))
        }
        if !body.isEmpty, let contentType { headers.append(("Content-Type", contentType)) }
        if let authorization { headers.append(("Authorization", authorization)) }
        let r = try http.send(method: method, path: path, headers: headers, body: body)
        let reply = Reply(status: r.status, headers: r.headers, body: r.body)
        TrafficLog.shared?.record(method: method, target: path, reply: reply)
        return reply
    }

    @discardableResult
    func post(_ path: String, _ json: JSONValue, authorization: String? = nil, headers: [(String, String)] = []) throws -> Reply {
        try send("POST", path, body: json.serialized(), authorization: authorization, headers: headers)
    }

    @discardableResult
    func get(_ path: String, authorization: String? = nil) throws -> Reply { try send("GET", path, authorization: authorization) }

    // MARK: Ceremonies

    func registrationOptions(username: String, displayName: String? = nil) throws -> Reply {
        try post("/v1/passkeys/registration/options",
                 .object([("username", .string(username)), ("displayName", .string(displayName ?? "Name of \(username)"))]))
    }

    func authenticationOptions(username: String? = nil) throws -> Reply {
        try post("/v1/passkeys/authentication/options", username.map { .object([("username", .string($0))]) } ?? .object([]))
    }

    /// Runs registration with `authenticator`: options (new account, or with `authorization`),
    /// then the builder (after `change`) posted to verify. Returns the options and the verify reply.
    /// `approver`: one of the account's passkeys, whose user-verified step-up for
    /// `{"type":"latchkey.passkey.add"}` goes with the options request (SPEC "Assurance": a passkey
    /// session needs it to add another passkey).
    @discardableResult
    func register(_ authenticator: SoftAuthenticator, username: String? = nil, authorization: String? = nil,
                  approver: SoftAuthenticator? = nil, body: JSONValue = .object([]),
                  format: RegistrationFormat = .none, change: (inout RegistrationBuilder) -> Void = { _ in }) throws
        -> (options: JSONValue, reply: Reply) {
        var headers: [(String, String)] = []
        if let approver, let authorization {
            headers.append(("Latchkey-Step-Up", try stepUpToken(approver, authorization: authorization, action: Self.passkeyAddition)))
        }
        let optionsReply = authorization != nil
            ? try post("/v1/passkeys/registration/options", body, authorization: authorization, headers: headers)
            : try registrationOptions(username: username ?? "user-\(uniqueSuffix())")
        guard optionsReply.status == 200, let options = optionsReply.json else {
            throw TestSetupError("registration options failed: \(optionsReply)")
        }
        let challenge = try challengeBytes(options)
        var builder = authenticator.registration(challenge: challenge, rpId: endpoint.rpId, origin: endpoint.origin)
        authenticator.userHandle = userHandle(options)
        builder.format = format
        change(&builder)
        return (options, try send("POST", "/v1/passkeys/registration/verify", body: builder.bytes()))
    }

    /// `DELETE /v1/passkeys/{id}` with the step-up SPEC "Assurance" asks for it, by `approver`.
    func revokePasskey(_ credentialId: [UInt8], authorization: String, approver: SoftAuthenticator) throws -> Reply {
        let id = Base64URL.encode(credentialId)
        let token = try stepUpToken(approver, authorization: authorization,
                                    action: .object([("type", "latchkey.passkey.revoke"), ("credentialId", .string(id))]))
        return try send("DELETE", "/v1/passkeys/\(id)", authorization: authorization, headers: [("Latchkey-Step-Up", token)])
    }

    static let passkeyAddition: JSONValue = .object([("type", "latchkey.passkey.add")])

    /// A user-verified passkey step-up by `approver` for `action`, asked for in the session of
    /// `authorization`: the step-up token (SPEC "Step-up"), or a thrown error with the refusal.
    func stepUpToken(_ approver: SoftAuthenticator, authorization: String, action: JSONValue) throws -> String {
        let c = try post("/v1/step-up/challenges", .object([("method", "passkey"), ("action", action)]), authorization: authorization)
        guard c.status == 201, let challenge = c.json, let options = challenge["publicKey"], let id = challenge["challengeId"] else {
            throw TestSetupError("step-up challenge failed: \(c)")
        }
        let assertion = try self.assertion(approver, options: options).json()
        let v = try post("/v1/step-up/verify", .object([("challengeId", id), ("credential", assertion)]), authorization: authorization)
        guard v.status == 200, let token = v.json?["access_token"]?.stringValue else { throw TestSetupError("step-up verify failed: \(v)") }
        return token
    }

    /// Registers a new account and expects 201.
    func signUp(_ authenticator: SoftAuthenticator, username: String, format: RegistrationFormat = .none) throws -> Session {
        let (_, reply) = try register(authenticator, username: username, format: format)
        guard reply.status == 201, let json = reply.json else { throw TestSetupError("registration failed: \(reply)") }
        return Session(reply: json)
    }

    /// Authentication options (discoverable when `username` is nil), then an assertion (after `change`).
    @discardableResult
    func login(_ authenticator: SoftAuthenticator, username: String? = nil,
               change: (inout AssertionBuilder) -> Void = { _ in }) throws -> (options: JSONValue, reply: Reply) {
        let optionsReply = try authenticationOptions(username: username)
        guard optionsReply.status == 200, let options = optionsReply.json else {
            throw TestSetupError("authentication options failed: \(optionsReply)")
        }
        var builder = try assertion(authenticator, options: options)
        change(&builder)
        return (options, try send("POST", "/v1/passkeys/authentication/verify", body: builder.bytes()))
    }

    func assertion(_ authenticator: SoftAuthenticator, options: JSONValue) throws -> AssertionBuilder {
        authenticator.assertion(challenge: try challengeBytes(options), rpId: endpoint.rpId, origin: endpoint.origin)
    }

    func signIn(_ authenticator: SoftAuthenticator, username: String? = nil) throws -> Session {
        let (_, reply) = try login(authenticator, username: username)
        guard reply.status == 200, let json = reply.json else { throw TestSetupError("login failed: \(reply)") }
        return Session(reply: json)
    }

    // MARK: Admin

    func enrolmentTicket(externalId: String, username: String) throws -> Reply {
        try post("/admin/v1/users/\(externalId)/enrolment-tickets",
                 .object([("username", .string(username)), ("displayName", .string("Ticket \(username)"))]),
                 authorization: "Bearer \(endpoint.adminKey ?? "")")
    }
}

/// The creation options' `user.id`: what a passkey stores and returns as `userHandle` (SoftAuthenticator.userHandle).
func userHandle(_ options: JSONValue) -> [UInt8]? { options["user"]?["id"]?.stringValue.flatMap(Base64URL.decode) }

func challengeBytes(_ options: JSONValue) throws -> [UInt8] {
    guard let text = options["challenge"]?.stringValue, let bytes = Base64URL.decode(text) else {
        throw TestSetupError("options carry no challenge: \(options.text)")
    }
    return bytes
}

/// Runs `body(i)` on `count` real threads that start together (a barrier), and waits for all.
func onThreads<T: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int, _ start: @Sendable () -> Void) -> T) -> [T] {
    let results = Mutex<[Int: T]>([:])
    let ready = Mutex(0)
    let gate = NSCondition()
    let group = DispatchGroup()
    for i in 0..<count {
        group.enter()
        let thread = Thread {
            // `start` blocks until every thread has called it, so the work after it overlaps.
            let start: @Sendable () -> Void = {
                gate.lock()
                let n = ready.withLock { $0 += 1; return $0 }
                if n == count { gate.broadcast() } else { while ready.withLock({ $0 }) < count { gate.wait() } }
                gate.unlock()
            }
            let r = body(i, start)
            results.withLock { $0[i] = r }
            group.leave()
        }
        thread.start()
    }
    group.wait()
    return results.withLock { d in (0..<count).compactMap { d[$0] } }
}


extension JSONValue {
    /// A copy with member `key` of this object set (replaced in place, or appended) or removed (nil).
    func setting(_ key: String, _ value: JSONValue?) -> JSONValue {
        guard case .object(var members) = self else { return self }
        if let i = members.firstIndex(where: { $0.key == key }) {
            if let value { members[i].value = value } else { members.remove(at: i) }
        } else if let value {
            members.append((key, value))
        }
        return .object(members)
    }

    /// `setting` on the nested object `response`.
    func settingResponse(_ key: String, _ value: JSONValue?) -> JSONValue {
        setting("response", (self["response"] ?? .object([])).setting(key, value))
    }
}

/// With `LATCHKEY_OPENAPI_TRAFFIC=<file>` (scripts/test.sh sets it), every exchange a suite's `Client`
/// has with a Latchkey server is appended to that file as one JSON line — method, target, status,
/// content type and body — and scripts/openapi/validate-traffic.py checks each response against the
/// OpenAPI document after the suites: the document is proven on the traffic the suites really see.
final class TrafficLog: Sendable {
    static let shared: TrafficLog? = JSONLines.fromEnvironment("LATCHKEY_OPENAPI_TRAFFIC").map(TrafficLog.init)

    private let lines: JSONLines
    init(_ lines: JSONLines) { self.lines = lines }

    func record(method: String, target: String, reply: Reply) {
        lines.append(.object([
            ("method", .string(method)), ("target", .string(target)), ("status", .number(Double(reply.status))),
            ("contentType", reply.contentType.map { .string($0) } ?? .null),
            ("body", .string(String(decoding: reply.body, as: UTF8.self))),
        ]))
    }
}

/// A file the suites append JSON lines to, from any thread (named by an environment variable).
final class JSONLines: Sendable {
    private let handle: Mutex<FileHandle?>

    static func fromEnvironment(_ name: String) -> JSONLines? {
        guard let path = ProcessInfo.processInfo.environment[name], !path.isEmpty else { return nil }
        return JSONLines(path: path)
    }

    init?(path: String) {
        if !FileManager.default.fileExists(atPath: path) { FileManager.default.createFile(atPath: path, contents: nil) }
        guard let h = FileHandle(forWritingAtPath: path) else { return nil }
        handle = Mutex(h)
    }

    func append(_ value: JSONValue) {
        let line = value.serialized() + Array("\n".utf8)
        handle.withLock { h in
            guard let h else { return }
            h.seekToEndOfFile()
            h.write(Data(line))
        }
    }
}

/// With `LATCHKEY_ROUND_TRIP_LOG=<file>` (scripts/test.sh sets it), every request a test server
/// answers is appended as one JSON line — route, method, status, and its round trips to PostgreSQL
/// by kind — and scripts/round-trips.py holds each route to ARCHITECTURE.md's "Round trips" after
/// the suites (SPEC "Performance targets": at most one read and one write a request).
/// Each request's statements and round trips by route ("POST /v1/…"), in the order the requests ended.
final class StatementTraces: Sendable {
    private let byRoute = Mutex<[String: [DatabaseWork]]>([:])

    func record(route: String, _ work: DatabaseWork) { byRoute.withLock { $0[route, default: []].append(work) } }

    /// The statements of the last request to `route`.
    func last(_ route: String) -> [String]? { lastWork(route)?.statements }

    /// The statements and round trips of the last request to `route`.
    func lastWork(_ route: String) -> DatabaseWork? { byRoute.withLock { $0[route]?.last } }
}

final class RoundTripLog: Sendable {
    static let shared: RoundTripLog? = JSONLines.fromEnvironment("LATCHKEY_ROUND_TRIP_LOG").map(RoundTripLog.init)

    private let lines: JSONLines
    init(_ lines: JSONLines) { self.lines = lines }

    @Sendable func record(route: String, method: String, status: Int, work: DatabaseWork) {
        let trips = work.roundTrips
        lines.append(.object([
            ("route", .string(route)), ("method", .string(method)), ("status", .number(Double(status))),
            ("reads", .number(Double(trips.reads))), ("writes", .number(Double(trips.writes))), ("control", .number(Double(trips.control))),
        ] + (work.items.map { [("items", JSONValue.number(Double($0)))] } ?? [])))
    }
}

extension TestServer {
    /// `path` sent three times with `authorization` (and `headers`) on a server made `tracing`; the
    /// reply, round trips and statements of the request that cost the fewest. A revocation feed that
    /// is stale for a moment adds the token's session read, which is not the route's own
    /// (ARCHITECTURE.md "Round trips per route").
    func fewestTrips(_ route: String, _ method: String, _ path: String, body: JSONValue?, authorization: String,
                     headers: [(String, String)] = []) throws -> (Reply, RoundTripCounts, [String]) {
        var best: (Reply, RoundTripCounts, [String])?
        for _ in 0..<3 {
            let reply = try client().send(method, path, body: body?.serialized() ?? [], authorization: authorization, headers: headers)
            let work = try #require(traces?.lastWork(route), "\(route) was not traced")
            if best == nil || work.roundTrips.total < best!.1.total { best = (reply, work.roundTrips, work.statements) }
        }
        return best!
    }
}
