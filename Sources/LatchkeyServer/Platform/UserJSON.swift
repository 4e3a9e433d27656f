import JSON
import Storage

extension UserRecord {
    /// SPEC's `user`: `{"id","username","displayName"}` (registration, login, email sign-in).
    var json: JSONValue { JSONObjectWriter.value(capacity: 96) { write(into: &$0) } }

    /// `json`'s members, written into an object (the one definition of the shape).
    func write(into writer: inout JSONObjectWriter) {
        writer.member("id", string: id)
        writer.member("username", string: username)
        writer.member("displayName", string: displayName)
    }
}
