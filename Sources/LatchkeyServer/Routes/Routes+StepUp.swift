import HTTP
import JSON

extension RouteTable {
    /// Device keys and step-up (SPEC "Device keys", "Step-up"; issue 5).
    mutating func addStepUpRoutes(_ s: Services) {
        add("POST", "/v1/device-keys/challenges", accepting: .any) { req, _ in
            .json(status: 201, bytes: try s.stepUp.enrolmentChallenge(userId: try s.sessions.requireUser(req)).serialized())
        }
        add("POST", "/v1/device-keys") { req, _ in
            let userId = try s.sessions.requireUser(req)
            let gate = EnrolmentGateCredentials(stepUpToken: req.header("Latchkey-Step-Up").map(\.trimmed),
                                                ticket: req.header("Latchkey-Ticket").map(\.trimmed))
            return .json(status: 201, bytes: try s.stepUp.enrol(userId: userId, body: try jsonBody(req), gate: gate).serialized())
        }
        add("GET", "/v1/device-keys", accepting: .any) { req, _ in
            .json(bytes: try s.stepUp.listDeviceKeys(userId: try s.sessions.requireUser(req)).serialized())
        }
        add("DELETE", "/v1/device-keys/{id}", accepting: .any) { req, params in
            let userId = try s.sessions.requireUser(req)
            guard let id = Identifiers.opaque(params["id"]) else { throw ServiceError.notFound("device key") }
            try s.stepUp.revokeDeviceKey(userId: userId, id: id)
            return .empty(status: 204)
        }
        add("POST", "/v1/step-up/challenges") { req, _ in
            let userId = try s.sessions.requireUser(req)
            return .json(status: 201, bytes: try s.stepUp.createChallenge(userId: userId, body: try jsonBody(req)).serialized())
        }
        add("POST", "/v1/step-up/verify") { req, _ in
            let caller = try s.sessions.requireSession(req)
            return .json(bytes: try s.stepUp.verify(userId: caller.userId, sessionId: caller.sessionId, body: try jsonBody(req)).serialized())
        }
        add("POST", "/v1/step-up/consume") { req, _ in
            guard let token = BearerCredentials.value(req, scheme: "Bearer") else { throw ServiceError.unauthorized }
            return .json(bytes: try s.stepUp.consume(token: token, body: try jsonBody(req)).serialized())
        }
        add("GET", "/v1/step-up/receipts/{id}", accepting: .any) { req, params in
            // The owner only. The admin key is accepted on /admin/v1/* alone (issue 13, defect 5):
            // auditors read receipts at /admin/v1/step-up/receipts/{id}, behind the admin listener.
            let owner = try s.sessions.requireUser(req)
            guard let id = Identifiers.opaque(params["id"]) else { throw ServiceError.notFound("receipt") }
            return .json(bytes: try s.stepUp.receipt(id: id, userId: owner).serialized())
        }
    }
}
