import JSON
import LatchkeyServer
import Storage
import Testing
import WebAuthnTesting

/// An admin user enrolled the way `latchkey admins add` does it: the role and a ticket, then the
/// first passkey registered with that ticket, whose session's tokens are kept here.
struct EnrolledAdmin {
    let client: Client
    let userId: String
    let accessToken: String
    let refreshToken: String
    let authenticator: SoftAuthenticator
    var bearer: String { "Bearer \(accessToken)" }

    /// A user-verified passkey step-up by this admin for `action` → the `Latchkey-Step-Up` token.
    func stepUp(_ action: JSONValue) throws -> String {
        try client.stepUpToken(authenticator, authorization: bearer, action: action)
    }
}

extension TestServer {
    func enrolAdmin(_ prefix: String = "admin") throws -> EnrolledAdmin {
        let added = try services.admin.addAdmin(username: username(prefix), by: .named("cli"))
        let client = client()
        let authenticator = SoftAuthenticator()
        let (_, reply) = try client.register(authenticator, authorization: "Ticket \(added.ticket)")
        #expect(reply.status == 201, "\(reply)")
        let tokens = try #require(reply.json?["tokens"])
        return EnrolledAdmin(client: client, userId: added.user.id,
                             accessToken: try #require(tokens["access_token"]?.stringValue),
                             refreshToken: try #require(tokens["refresh_token"]?.stringValue), authenticator: authenticator)
    }
}
