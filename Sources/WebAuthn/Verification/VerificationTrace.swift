import JSON
import Synchronization

/// Records what a verification decoded and which checks it ran, for `latchkey inspect` and audit.
/// Verification code reports into it when one is given; the server's hot path passes none.
public final class VerificationTrace: Sendable {
    public struct Check: Sendable {
        public let name: String
        public let passed: Bool
        public let detail: String
    }

    private let state = Mutex<(checks: [Check], fields: [(key: String, value: JSONValue)])>(([], []))

    public init() {}

    public var checks: [Check] { state.withLock { $0.checks } }
    public var decoded: [(key: String, value: JSONValue)] { state.withLock { $0.fields } }

    public func record(_ name: String, _ passed: Bool, _ detail: String = "") {
        state.withLock { $0.checks.append(Check(name: name, passed: passed, detail: detail)) }
    }

    public func decoded(_ key: String, _ value: JSONValue) {
        state.withLock { $0.fields.append((key: key, value: value)) }
    }
}

extension Optional where Wrapped == VerificationTrace {
    /// Runs one named check: records its outcome and throws `error` when it fails.
    @inline(__always)
    func require(_ name: String, _ condition: Bool, _ error: @autoclosure () -> WebAuthnError) throws(WebAuthnError) {
        if let trace = self { trace.record(name, condition, condition ? "" : error().reason) }
        if !condition { throw error() }
    }

    /// Records the named check as failed and throws `error`: for checks whose failure is found
    /// on a path (a failed parse, a missing value) rather than as a condition.
    func fail(_ name: String, _ error: @autoclosure () -> WebAuthnError) throws(WebAuthnError) -> Never {
        let error = error()
        self?.record(name, false, error.reason)
        throw error
    }

    func pass(_ name: String, _ detail: String = "") { self?.record(name, true, detail) }
    func decoded(_ key: String, _ value: @autoclosure () -> JSONValue) { self?.decoded(key, value()) }
}
