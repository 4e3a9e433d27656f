import DeviceKeys
import Storage
import HTTP
import JSON

extension RouteTable {
    /// Device keys and step-up (SPEC "Device keys", "Step-up", "Trust chain").
    mutating func addStepUpRoutes(_ s: Services) {
        add("POST", "/v1/device-keys/challenges", .session, accepting: .any) { ctx in
            .json(status: 201, bytes: DeviceKeyRenderer.enrolmentChallenge(try s.deviceKeys.enrolmentChallenge(userId: try ctx.userId)).serialized())
        }
        add("POST", "/v1/device-keys", .session, stepUp: .deviceKeyEnrolment) { ctx in
            guard let approval = ctx.approval else { throw StepUpService.stepUpRequired("send Latchkey-Step-Up or Latchkey-Ticket") }
            let gate: EnrolmentGate = switch approval {
            case .stepUp(let r, _, _): .stepUp(jti: r.jti, actionHash: r.actionHash)
            case .ticket(let hash): .ticket(hash: hash)
            }
            let caller = try ctx.session()
            let enrolled = try s.deviceKeys.enrol(userId: caller.userId, body: try ctx.json(), gate: gate, sessionId: caller.sessionId)
            return .json(status: 201, bytes: DeviceKeyRenderer.deviceKey(enrolled).serialized())
        }
        add("GET", "/v1/device-keys", .session, accepting: .any) { ctx in
            .json(bytes: DeviceKeyRenderer.list(try s.deviceKeys.listDeviceKeys(userId: try ctx.userId)).serialized())
        }
        add("DELETE", "/v1/device-keys/{id:opaque}", .session, accepting: .any) { ctx in
            try s.deviceKeys.revokeDeviceKey(userId: try ctx.userId, id: try ctx.path.text("id"))
            return .empty(status: 204)
        }
        // SPEC "The cookie routes": the OP session cookie stands in for a Bearer token here for the
        // one action type the /authorize page asks for, and no other.
        add("POST", "/v1/step-up/challenges", .sessionOrBrowser) { ctx in
            let (caller, browser) = try ctx.sessionOrBrowser()
            let issued = try s.stepUp.createChallenge(userId: caller.userId, body: try ctx.json(),
                                                      onlyActionType: browser ? GatedActionType.oauthAuthorization : nil,
                                                      acceptLanguage: ctx.request.header("Accept-Language"))
            return .json(status: 201, bytes: StepUpRenderer.challenge(issued).serialized())
        }
        add("POST", "/v1/step-up/verify", .sessionOrBrowser) { ctx in
            let (caller, browser) = try ctx.sessionOrBrowser()
            let verified = try s.stepUp.verify(userId: caller.userId, sessionId: caller.sessionId, body: try ctx.json(),
                                               onlyActionType: browser ? GatedActionType.oauthAuthorization : nil)
            return .json(bytes: StepUpRenderer.verified(verified).serialized())
        }
        add("POST", "/v1/step-up/consume", .stepUpToken) { ctx in
            guard case .stepUpBearer(let token) = ctx.caller else { throw ServiceError.unauthorized }
            return .json(bytes: StepUpRenderer.consumed(try s.stepUp.consume(token: token, body: try ctx.json())).serialized())
        }
        add("GET", "/v1/step-up/receipts/{id:opaque}", .session, accepting: .any) { ctx in
            // The owner only. The admin key is accepted on /admin/v1/* alone:
            // auditors read receipts at /admin/v1/step-up/receipts/{id}, behind the admin listener.
            .json(bytes: StepUpRenderer.receipt(try s.stepUp.receipt(id: try ctx.path.text("id"), userId: try ctx.userId)).serialized())
        }
    }
}

extension StepUpRule {
    /// SPEC "Trust chain": `{"type":"latchkey.device-key.enrol","deviceId":…}` from a user-verified
    /// passkey, or an app backend's device-key ticket (`Latchkey-Ticket`) in its place.
    static let deviceKeyEnrolment = StepUpRule.always("device-key enrolments", ticketInstead: true) { input throws(ServiceError) in
        // The whole body is checked here: a malformed one is invalid_request before the step-up is looked at.
        let deviceId = try EnrolmentInput(input.body ?? .object([])).deviceId
        return try gated { () throws(DeviceKeyError) in try StepUpAction.deviceKeyEnrolment(deviceId: deviceId) }
    }
}
