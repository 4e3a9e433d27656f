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
    /// `loaded`: the list the admin's caller resolution read with the role (`GuardLoads.adminPage`).
    func findUsers(username: String?, loaded: AdminPageRead? = nil) throws(ServiceError) -> [UserSummary] {
        guard let username, !username.isEmpty else { throw ServiceError.invalid("username is required") }
        guard Self.search(username) != nil else { throw ServiceError.invalid("username is at most 64 characters") }
        if case .users(let found)? = loaded { return found }
        return try storage { () throws(StorageError) in try store.findUsers(usernamePrefix: username, limit: Self.searchLimit) }
    }

    static let searchLimit = 20

    /// The search `findUsers` makes for `username`; nil for one it refuses (it says why).
    static func search(_ username: String?) -> AdminPageRequest? {
        guard let username, !username.isEmpty, username.utf8.count <= 64 else { return nil }
        return .users(prefix: username, limit: searchLimit)
    }

    /// `GET /admin/v1/users/{id}`: the user with their passkeys (SPEC's passkey shape, provider
    /// names included), device keys (with what their attestation proved) and live sessions.
    /// `loaded`: the page the admin's caller resolution read with the role (`GuardLoads.adminPage`).
    func user(id: String, loaded: AdminPageRead? = nil) throws(ServiceError) -> AdminUserPage {
        guard Self.page(id) != nil else { throw ServiceError.notFound("user") }
        let page: AdminUserPage?
        if case .userPage(let read)? = loaded {
            page = read
        } else {
            page = try storage({ () throws(StorageError) in try store.userPage(id: id) })
        }
        guard let page else { throw ServiceError.notFound("user") }
        return page
    }

    /// The page `user(id:)` reads for `id`; nil for an id that names nothing.
    static func page(_ id: String) -> AdminPageRequest? {
        guard !id.isEmpty, id.utf8.count <= 64 else { return nil }
        return .userPage(id: id)
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
