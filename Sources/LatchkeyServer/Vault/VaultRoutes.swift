import DeviceKeys
import HTTP
import JSON
import Storage

extension RouteTable {
    /// SPEC "Portability" → "A vault the server cannot read (PRF)": the vault's salt and wrapped
    /// keys, for the owner's sessions; each wrap a gated change (SPEC "Assurance").
    mutating func addVaultRoutes(_ s: Services) {
        let vault = s.vault
        add("PUT", "/v1/vault", .session) { ctx in
            .json(status: 201, bytes: VaultRenderer.vault(try vault.create(try CreateVault(try ctx.json()), userId: try ctx.userId)).serialized())
        }
        add("GET", "/v1/vault", .session, accepting: .any) { ctx in
            let caller = try ctx.session()
            return .json(bytes: VaultRenderer.vault(try vault.show(userId: caller.userId, sessionId: caller.sessionId)).serialized())
        }
        add("PUT", "/v1/vault/wrapped/{credentialId:credential}", .session, stepUp: .vaultWrap) { ctx in
            guard let redemption = ctx.redemption else { throw StepUpService.stepUpRequired("send Latchkey-Step-Up") }
            try vault.wrap(try WrappedKeyBody(try ctx.json()), credentialId: try ctx.path.bytes("credentialId"), userId: try ctx.userId,
                           redeeming: redemption)
            return .empty(status: 204)
        }
        add("PUT", "/v1/vault/recovery", .session, stepUp: .vaultRecovery) { ctx in
            guard let redemption = ctx.redemption else { throw StepUpService.stepUpRequired("send Latchkey-Step-Up") }
            try vault.setRecovery(try WrappedKeyBody(try ctx.json()), userId: try ctx.userId, redeeming: redemption)
            return .empty(status: 204)
        }
    }
}

extension StepUpRule {
    /// SPEC "Assurance": `{"type":"latchkey.vault.wrap","credentialId":<the id in the path>}`; a
    /// malformed body is 400 before the step-up is looked at.
    static let vaultWrap = StepUpRule.always("vault wraps") { input throws(ServiceError) in
        _ = try WrappedKeyBody(input.body ?? .null)
        let id = input.rawPath["credentialId"] ?? ""
        return try gated { () throws(DeviceKeyError) in try StepUpAction.vaultWrap(credentialId: id) }
    }

    /// SPEC "Assurance": `{"type":"latchkey.vault.recovery"}`; a malformed body is 400 first.
    static let vaultRecovery = StepUpRule.always("vault recovery wraps") { input throws(ServiceError) in
        _ = try WrappedKeyBody(input.body ?? .null)
        return try gated { () throws(DeviceKeyError) in try StepUpAction.vaultRecovery() }
    }
}
