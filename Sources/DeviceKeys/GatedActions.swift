import JSON

/// The actions Latchkey itself gates behind a step-up (SPEC "Trust chain"; STYLE §10: an action is
/// data, built in one place, and the client builds the same JSON). Their `type`s start with
/// `latchkey.` so no app action can ever be mistaken for one.
extension StepUpAction {
    /// `{"type":"latchkey.device-key.enrol","deviceId":…}`: enrolling (or replacing) the device key of `deviceId`.
    public static func deviceKeyEnrolment(deviceId: String) throws(DeviceKeyError) -> StepUpAction {
        try StepUpAction(.object([("type", .string(GatedActionType.deviceKeyEnrolment)), ("deviceId", .string(deviceId))]))
    }

    /// `{"type":"latchkey.recovery-codes.create"}`: a new set of recovery codes (SPEC "Recovery").
    public static func recoveryCodesCreation() throws(DeviceKeyError) -> StepUpAction {
        try StepUpAction(.object([("type", .string(GatedActionType.recoveryCodesCreation))]))
    }

    /// `{"type":"latchkey.passkey.add"}`: registration options for another passkey on a signed-in
    /// account (SPEC "Assurance"): the step-up travels with the options request.
    public static func passkeyAddition() throws(DeviceKeyError) -> StepUpAction {
        try StepUpAction(.object([("type", .string(GatedActionType.passkeyAddition))]))
    }

    /// `{"type":"latchkey.passkey.revoke","credentialId":…}`: revoking that passkey (its id as in the path, base64url).
    public static func passkeyRevocation(credentialId: String) throws(DeviceKeyError) -> StepUpAction {
        try StepUpAction(.object([("type", .string(GatedActionType.passkeyRevocation)), ("credentialId", .string(credentialId))]))
    }

    /// `{"type":"latchkey.email.change","email":…}`: setting or replacing the verified address with
    /// `email`, exactly as the request body sends it.
    public static func emailChange(email: String) throws(DeviceKeyError) -> StepUpAction {
        try StepUpAction(.object([("type", .string(GatedActionType.emailChange)), ("email", .string(email))]))
    }
}

public enum GatedActionType {
    public static let deviceKeyEnrolment = "latchkey.device-key.enrol"
    public static let recoveryCodesCreation = "latchkey.recovery-codes.create"
    public static let adminChange = "latchkey.admin"
    public static let passkeyAddition = "latchkey.passkey.add"
    public static let passkeyRevocation = "latchkey.passkey.revoke"
    public static let emailChange = "latchkey.email.change"
    public static let oauthAuthorization = "latchkey.oauth.authorize"
    /// One account's vote for a quorum approval (SPEC "Quorum approvals" → "Approving").
    public static let approvalVote = "latchkey.approval"
    /// Storing the vault's data key wrapped for one passkey.
    public static let vaultWrap = "latchkey.vault.wrap"
    /// Setting the vault's data key wrapped under the vault's recovery key.
    public static let vaultRecovery = "latchkey.vault.recovery"
    /// Exporting every account (`GET /admin/v1/export`).
    public static let adminExport = "latchkey.admin.export"
    /// Importing one file of accounts (`POST /admin/v1/import`), bound to the file's SHA-256.
    public static let adminImport = "latchkey.admin.import"
}

extension StepUpAction {
    /// `{"type":"latchkey.admin.export"}`: an export of every account (SPEC "Portability" → Export).
    public static func adminExport() throws(DeviceKeyError) -> StepUpAction {
        try StepUpAction(.object([("type", .string(GatedActionType.adminExport))]))
    }

    /// `{"type":"latchkey.admin.import","sha256":…}`: importing exactly the file whose SHA-256
    /// (lower-case hex, of the whole request body) is `sha256` (SPEC "Portability" → Import).
    public static func adminImport(sha256: String) throws(DeviceKeyError) -> StepUpAction {
        try StepUpAction(.object([("type", .string(GatedActionType.adminImport)), ("sha256", .string(sha256))]))
    }
}

extension StepUpAction {
    /// `{"type":"latchkey.vault.wrap","credentialId":…}`: storing the vault's data key wrapped for
    /// the passkey `credentialId` (base64url, as the request path sends it).
    public static func vaultWrap(credentialId: String) throws(DeviceKeyError) -> StepUpAction {
        try StepUpAction(.object([("type", .string(GatedActionType.vaultWrap)), ("credentialId", .string(credentialId))]))
    }

    /// `{"type":"latchkey.vault.recovery"}`: setting the vault's recovery wrap.
    public static func vaultRecovery() throws(DeviceKeyError) -> StepUpAction {
        try StepUpAction(.object([("type", .string(GatedActionType.vaultRecovery))]))
    }
}

extension StepUpAction {
    /// `{"type":"latchkey.oauth.authorize","clientId":…,"requestId":…,"authorizationDetails":[…]|null}`
    /// (SPEC "OpenID Provider", "Approve and deny"): approving one authorization request, whose RFC
    /// 9396 `authorization_details` are exactly these, for exactly that client. A step-up for another
    /// request or other details is another action, so one approval approves one request.
    public static func oauthAuthorization(clientId: String, requestId: String, authorizationDetails: JSONValue) throws(DeviceKeyError) -> StepUpAction {
        try StepUpAction(.object([("type", .string(GatedActionType.oauthAuthorization)), ("clientId", .string(clientId)),
                                  ("requestId", .string(requestId)), ("authorizationDetails", authorizationDetails)]))
    }
}

extension StepUpAction {
    /// `{"type":"latchkey.admin","method":…,"path":…,"body":…}` (SPEC "Admin console"): one admin
    /// change made with a user token — the HTTP method (upper case), the request path exactly as
    /// sent (still percent-encoded, no query), and the request's JSON body or null. The step-up
    /// approves exactly that request: another path, method or body is another action.
    public static func adminChange(method: String, path: String, body: JSONValue?) throws(DeviceKeyError) -> StepUpAction {
        try StepUpAction(.object([("type", .string(GatedActionType.adminChange)), ("method", .string(method)), ("path", .string(path)),
                                  ("body", body ?? .null)]))
    }
}
