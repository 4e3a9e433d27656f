import Crypto
import Foundation
import HTTP
import JSON
import Synchronization
import WebAuthn
import WebAuthnTesting

/// `latchkey bench failover --urls http://a,http://b --origin O --concurrency N --duration S`:
/// the bounded load of `scripts/failover-test.sh`. Each of N threads per URL signs up a new passkey
/// account and signs in with it, again and again, recording every answer; a registration whose
/// answer was lost (no answer, or 503) is sent again with the same response until it gets an answer
/// (as the web app does, for longer): 201 or 409 `credential_exists` means saved. Afterwards every
/// acknowledged write is checked: each acknowledged registration signs in again, each acknowledged
/// sign-in's refresh token still works. Prints one JSON object: per URL the answers, the longest
/// gap between successes (the outage) and whether the last seconds were all successes; the writes
/// acknowledged and lost.
enum FailoverLoad {
    struct Attempt {
        let instance: Int
        let kind: String
        let started: Double
        let finished: Double
        let status: Int
    }

    final class Account: @unchecked Sendable {
        let authenticator: SoftAuthenticator
        let username: String
        let instance: Int
        init(_ authenticator: SoftAuthenticator, _ username: String, _ instance: Int) {
            self.authenticator = authenticator
            self.username = username
            self.instance = instance
        }
    }

    struct Recorded {
        var attempts: [Attempt] = []
        var registrations: [Account] = []
        var sessions: [(instance: Int, refresh: String)] = []
        var savedOnRetry = 0
    }

    static func run(_ args: ParsedArguments) throws(UsageError) -> Int32 {
        guard let list = args.value("urls") else { throw UsageError(message: "--urls http://host:port[,http://host:port…] is required") }
        let targets = list.split(separator: ",").compactMap { url -> (String, Int)? in
            let rest = url.dropFirst("http://".count).split(separator: "/").first ?? ""
            let parts = rest.split(separator: ":")
            guard url.hasPrefix("http://"), parts.count == 2, let port = Int(parts[1]) else { return nil }
            return (String(parts[0]), port)
        }
        guard !targets.isEmpty else { throw UsageError(message: "--urls must be http://host:port, comma-separated") }
        guard let origin = args.value("origin") else { throw UsageError(message: "--origin is required") }
        let concurrency = Int(args.value("concurrency") ?? "3") ?? 3
        let duration = Double(args.value("duration") ?? "20") ?? 20
        let prefix = args.value("prefix") ?? "fo\(UInt32.random(in: 0...UInt32.max))"

        let recorded = Mutex(Recorded())
        let clock = ProcessInfo.processInfo
        let t0 = clock.systemUptime
        let end = t0 + duration
        let group = DispatchGroup()
        for (index, target) in targets.enumerated() {
            for worker in 0..<concurrency {
                group.enter()
                let thread = Thread {
                    defer { group.leave() }
                    let client = HTTPClient(host: target.0, port: target.1, timeoutSeconds: 60)
                    var n = 0
                    while clock.systemUptime < end {
                        n += 1
                        let username = "\(prefix)-\(index)-\(worker)-\(n)"
                        let started = clock.systemUptime - t0
                        let (status, account, retried) = register(client, username: username, origin: origin, instance: index)
                        recorded.withLock {
                            $0.attempts.append(Attempt(instance: index, kind: "register", started: started, finished: clock.systemUptime - t0, status: status))
                            if let account { $0.registrations.append(account) }
                            if retried { $0.savedOnRetry += 1 }
                        }
                        guard let account else { Thread.sleep(forTimeInterval: 0.05); continue }
                        let loginStarted = clock.systemUptime - t0
                        let (loginStatus, refresh) = signIn(client, account, origin: origin)
                        recorded.withLock {
                            $0.attempts.append(Attempt(instance: index, kind: "login", started: loginStarted, finished: clock.systemUptime - t0, status: loginStatus))
                            if let refresh { $0.sessions.append((index, refresh)) }
                        }
                        if loginStatus != 200 { Thread.sleep(forTimeInterval: 0.05) }
                    }
                }
                thread.start()
            }
        }
        group.wait()
        let result = recorded.withLock { $0 }
        let (lostRegistrations, lostSessions, unverified) = verify(result, targets: targets, origin: origin)
        var instances: [JSONValue] = []
        for (index, target) in targets.enumerated() {
            let mine = result.attempts.filter { $0.instance == index }
            let successes = mine.filter { $0.status == 200 || $0.status == 201 }.map(\.finished).sorted()
            // The longest stretch without a success, the run's start and end included.
            let runEnd = max(duration, mine.map(\.finished).max() ?? duration)
            let bounds = [0.0] + successes + [runEnd]
            var gap = 0.0
            for (a, b) in zip(bounds, bounds.dropFirst()) { gap = max(gap, b - a) }
            let tail = mine.filter { $0.started > duration - 3 }
            var statuses: [String: Int] = [:]
            for a in mine { statuses[String(a.status), default: 0] += 1 }
            instances.append(.object([
                ("url", .string("http://\(target.0):\(target.1)")),
                ("attempts", .number(Double(mine.count))),
                ("statuses", .object(statuses.sorted { $0.key < $1.key }.map { ($0.key, .number(Double($0.value))) })),
                ("outage_s", .number((gap * 10).rounded() / 10)),
                ("recovered", .bool(!tail.isEmpty && tail.allSatisfy { $0.status == 200 || $0.status == 201 })),
            ]))
        }
        let summary = JSONValue.object([
            ("instances", .array(instances)),
            ("acknowledged_registrations", .number(Double(result.registrations.count))),
            ("acknowledged_logins", .number(Double(result.sessions.count))),
            ("saved_on_retry", .number(Double(result.savedOnRetry))),
            ("lost_registrations", .number(Double(lostRegistrations))),
            ("lost_logins", .number(Double(lostSessions))),
            ("unverified", .number(Double(unverified))),
        ])
        print(String(decoding: summary.serialized(), as: UTF8.self))
        return lostRegistrations == 0 && lostSessions == 0 && unverified == 0 ? 0 : 1
    }

    /// Options + verify; on a lost answer the same response once more. Returns the first answer's
    /// status (-1: none) and the account when it is saved.
    static func register(_ client: HTTPClient, username: String, origin: String, instance: Int) -> (Int, Account?, Bool) {
        let request = #"{"username":"\#(username)","displayName":"\#(username)"}"#
        let options = client.postJSON("/v1/passkeys/registration/options", Array(request.utf8))
        guard let options, options.status == 200, let json = try? JSONParser.parse(options.body),
              let challenge = json["challenge"]?.stringValue.flatMap(Base64URL.decode), let rpId = json["rp"]?["id"]?.stringValue else {
            return (options?.status ?? -1, nil, false)
        }
        let authenticator = SoftAuthenticator(algorithm: .es256)
        authenticator.userHandle = json["user"]?["id"]?.stringValue.flatMap(Base64URL.decode)
        let body = authenticator.registration(challenge: challenge, rpId: rpId, origin: origin).bytes()
        let verify = client.postJSON("/v1/passkeys/registration/verify", body)
        let status = verify?.status ?? -1
        if status == 201 { return (201, Account(authenticator, username, instance), false) }
        guard status == 503 || status == -1 else { return (status, nil, false) }
        // Retried while the answer is lost (through the whole outage, up to 30 s): a try that had
        // committed is then 201 never, 409 credential_exists always; one that had not, challenge_invalid.
        for _ in 0..<60 {
            Thread.sleep(forTimeInterval: 0.5)
            guard let again = client.postJSON("/v1/passkeys/registration/verify", body), again.status != 503 else { continue }
            let saved = again.status == 201
                || (again.status == 409 && (try? JSONParser.parse(again.body))?["code"]?.stringValue == "credential_exists")
            return (status, saved ? Account(authenticator, username, instance) : nil, saved)
        }
        return (status, nil, false)
    }

    /// Username-first options + assertion; the status and the refresh token of a 200.
    static func signIn(_ client: HTTPClient, _ account: Account, origin: String) -> (Int, String?) {
        let request = #"{"username":"\#(account.username)"}"#
        let options = client.postJSON("/v1/passkeys/authentication/options", Array(request.utf8))
        guard let options, options.status == 200, let json = try? JSONParser.parse(options.body),
              let challenge = json["challenge"]?.stringValue.flatMap(Base64URL.decode), let rpId = json["rpId"]?.stringValue else {
            return (options?.status ?? -1, nil)
        }
        let body = account.authenticator.assertion(challenge: challenge, rpId: rpId, origin: origin).bytes()
        guard let verify = client.postJSON("/v1/passkeys/authentication/verify", body) else { return (-1, nil) }
        let refresh = verify.status == 200 ? (try? JSONParser.parse(verify.body))?["tokens"]?["refresh_token"]?.stringValue : nil
        return (verify.status, refresh)
    }

    /// Every acknowledged registration signs in, every acknowledged session refreshes (503s and
    /// lost answers retried for a while). Returns (lost registrations, lost sessions, unverified).
    static func verify(_ r: Recorded, targets: [(String, Int)], origin: String) -> (Int, Int, Int) {
        let lost = Mutex((0, 0, 0))
        let accounts = r.registrations
        let sessions = r.sessions
        let threads = 6
        let group = DispatchGroup()
        for t in 0..<threads {
            group.enter()
            Thread {
                defer { group.leave() }
                let clients = targets.map { HTTPClient(host: $0.0, port: $0.1, timeoutSeconds: 60) }
                for (i, account) in accounts.enumerated() where i % threads == t {
                    var status = -1
                    for attempt in 0..<20 {
                        status = signIn(clients[account.instance], account, origin: origin).0
                        if status == 200 || (status >= 400 && status < 500) { break }
                        Thread.sleep(forTimeInterval: Double(min(attempt + 1, 3)) * 0.5)
                    }
                    if status != 200 {
                        lost.withLock { status >= 400 && status < 500 ? ($0.0 += 1) : ($0.2 += 1) }
                        printError("failover load: registration of \(account.username) acknowledged, sign-in now \(status)")
                    }
                }
                for (i, session) in sessions.enumerated() where i % threads == t {
                    var status = -1
                    let body = Array(#"{"grant_type":"refresh_token","refresh_token":"\#(session.refresh)"}"#.utf8)
                    for attempt in 0..<20 {
                        status = clients[session.instance].postJSON("/v1/token", body)?.status ?? -1
                        if status == 200 || (status >= 400 && status < 500) { break }
                        Thread.sleep(forTimeInterval: Double(min(attempt + 1, 3)) * 0.5)
                    }
                    if status != 200 {
                        lost.withLock { status >= 400 && status < 500 ? ($0.1 += 1) : ($0.2 += 1) }
                        printError("failover load: an acknowledged sign-in's refresh token now answers \(status)")
                    }
                }
            }.start()
        }
        group.wait()
        return lost.withLock { $0 }
    }
}
