import JSON
import Storage

extension UserRecord {
    /// SPEC's `user`: `{"id","username","displayName"}` (registration, login, email sign-in).
    var json: JSONValue {
        .object([("id", .string(id)), ("username", .string(username)), ("displayName", .string(displayName))])
    }
}
