import Crypto
import JSON

/// The action a user approves ("transfer 200 EUR to account X"): a JSON object, bound to a
/// challenge by the SHA-256 of its RFC 8785 canonical form. Amounts belong in strings: RFC 8785
/// numbers are IEEE doubles, so `200.00` and `200` are the same action.
public struct StepUpAction: Sendable {
    public let value: JSONValue
    /// RFC 8785 (JCS) bytes: what the hash covers and what a receipt stores.
    public let canonical: [UInt8]
    /// SHA-256 of `canonical`.
    public let hash: [UInt8]

    public static let maxCanonicalLength = 4096

    public init(_ value: JSONValue) throws(DeviceKeyError) {
        guard case .object(let members) = value else { throw .invalid("action must be a JSON object") }
        guard !members.isEmpty else { throw .invalid("action must not be empty") }
        guard Self.allNumbersFinite(value) else { throw .invalid("action holds a number that is not finite") }
        self.value = value
        canonical = value.canonicalized()
        guard canonical.count <= Self.maxCanonicalLength else {
            throw .invalid("action is longer than \(Self.maxCanonicalLength) bytes in canonical form")
        }
        hash = Digest.sha256(canonical)
    }

    /// The action from the canonical text a receipt stored.
    public init(canonical text: [UInt8]) throws(DeviceKeyError) {
        let parsed: JSONValue
        do { parsed = try JSONParser.parse(text) } catch { throw .invalid("action: \(error.reason)") }
        try self.init(parsed)
    }

    static func allNumbersFinite(_ v: JSONValue) -> Bool {
        switch v {
        case .number(let d): return d.isFinite
        case .array(let a): return a.allSatisfy(allNumbersFinite)
        case .object(let o): return o.allSatisfy { allNumbersFinite($0.value) }
        default: return true
        }
    }
}
