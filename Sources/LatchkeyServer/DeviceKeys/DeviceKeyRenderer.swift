import Crypto
import DeviceKeys
import JSON
import Storage

/// The device-key resources as JSON (SPEC "Device keys", "Trust chain"): pure functions from the
/// values `DeviceKeyService` returns, for the routes and the admin console's users page.
enum DeviceKeyRenderer {
    /// SPEC's device-key shape.
    static func deviceKey(_ k: DeviceKeyRecord) -> JSONValue {
        .object([("id", .string(k.id)), ("deviceId", .string(k.deviceId)), ("platform", .string(k.platform.rawValue)), ("name", .string(k.name)),
                 ("createdAt", .string(iso8601(k.createdAt))), ("lastUsedAt", k.lastUsedAt.map { .string(iso8601($0)) } ?? .null),
                 ("attested", .bool(k.attested)),
                 // SPEC "Trust chain": the response tells the truth about what was proven.
                 ("attestation", .object([("format", .string(k.attestationFormat.rawValue)), ("securityLevel", .string(k.securityLevel.rawValue)),
                                          ("app", k.app.map { .string($0) } ?? .null)]))])
    }

    /// `GET /v1/device-keys`: `{"deviceKeys":[…]}`.
    static func list(_ keys: [DeviceKeyRecord]) -> JSONValue { .object([("deviceKeys", .array(keys.map(deviceKey)))]) }

    /// `POST /v1/device-keys/challenges`: the bytes the new key signs as proof of possession.
    static func enrolmentChallenge(_ o: EnrolmentOptions) -> JSONValue {
        .object([("challengeId", .string(Base64URL.encode(o.challengeId))), ("challenge", .string(Base64URL.encode(o.challenge))),
                 ("expiresAt", .string(iso8601(unixSeconds: o.expiresAt)))])
    }
}
