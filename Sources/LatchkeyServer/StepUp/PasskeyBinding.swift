import Crypto
import JSON

/// What a passkey step-up challenge's key hash covers: the user's passkeys at issue time, as RFC 8785
/// JSON `{"credentialIds":[…],"method":"passkey","rpId":…}` (ids sorted), kept in the receipt.
struct PasskeyBinding: Sendable {
    let credentialIds: [[UInt8]]
    let rpId: String

    init(credentialIds: [[UInt8]], rpId: String) {
        self.credentialIds = credentialIds
        self.rpId = rpId
    }

    var bytes: [UInt8] {
        JSONValue.object([("credentialIds", .array(credentialIds.map { Base64URL.encode($0) }.sorted().map { .string($0) })),
                          ("method", "passkey"), ("rpId", .string(rpId))]).canonicalized()
    }

    /// The binding as stored in the ceremony state; anything else is a ceremony state we did not write.
    init(decoding bytes: [UInt8]) throws(ServiceError) {
        let unreadable = ServiceError(.challengeInvalid, "the stored ceremony state is unreadable")
        let value: JSONValue
        do { value = try JSONParser.parse(bytes) } catch { throw unreadable }
        guard let list = value["credentialIds"]?.arrayValue, let rpId = value["rpId"]?.stringValue else { throw unreadable }
        var ids: [[UInt8]] = []
        for item in list {
            guard let text = item.stringValue, let id = Base64URL.decode(text) else { throw unreadable }
            ids.append(id)
        }
        self.init(credentialIds: ids, rpId: rpId)
    }
}
