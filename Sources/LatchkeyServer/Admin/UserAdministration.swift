import JSON
import Storage

/// The admin console's users page (SPEC "Admin console"): find a user, see their passkeys, device
/// keys and sessions, and revoke them. The page is read in one query of the admin store
/// (`AdminStore.userPage`) and returned as that value (`AdminRenderer.userPage` renders it); a revocation
/// is the owning feature's work, reached through its service. Changes are approved by the route
/// table (`StepUpRule.adminChange`) and redeemed by the owning service's transaction.
final class UserAdministration: Sendable {
    let store: any AdminStore
    let passkeys: PasskeyService
    let deviceKeys: DeviceKeyService
    let sessions: SessionService

    init(store: any AdminStore, passkeys: PasskeyService, deviceKeys: DeviceKeyService, sessions: SessionService) {
        self.store = store
        self.passkeys = passkeys
        self.deviceKeys = deviceKeys
        self.sessions = sessions
    }

    /// `GET /admin/v1/users?username=`: users whose username starts with it, the exact match first (at most 20).
    func findUsers(username: String?) throws(ServiceError) -> [UserSummary] {
        guard let username, !username.isEmpty else { throw ServiceError.invalid("username is required") }
        guard username.utf8.count <= 64 else { throw ServiceError.invalid("username is at most 64 characters") }
        return try storage { () throws(StorageError) in try store.findUsers(usernamePrefix: username, limit: 20) }
    }

    /// `GET /admin/v1/users/{id}`: the user with their passkeys (SPEC's passkey shape, provider
    /// names included), device keys (with what their attestation proved) and live sessions.
    func user(id: String) throws(ServiceError) -> AdminUserPage {
        guard !id.isEmpty, id.utf8.count <= 64,
              let page = try storage({ () throws(StorageError) in try store.userPage(id: id) }) else { throw ServiceError.notFound("user") }
        return page
    }

    /// `loaded`: what the route's last-way-in check read (the revocation's notice needs it too).
    func revokePasskey(userId: String, credentialId: [UInt8], by caller: AdminCaller, loaded: LoadedRevocation? = nil) throws(ServiceError) {
        _ = try passkeys.revokePasskey(userId: userId, credentialId: credentialId, by: caller, loaded: loaded)
    }

    func revokeDeviceKey(userId: String, keyId: String, by caller: AdminCaller) throws(ServiceError) {
        try deviceKeys.revokeDeviceKey(userId: userId, id: keyId, by: caller)
    }

    func endSession(userId: String, sessionId: String, by caller: AdminCaller) throws(ServiceError) {
        try sessions.end(userId: userId, sessionId: sessionId, by: caller)
    }
}
