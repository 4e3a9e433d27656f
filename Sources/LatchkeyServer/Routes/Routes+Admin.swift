import HTTP
import JSON

/// An app backend's own user id (`{externalId}`): 1…128 printable characters.
func externalUserId(_ params: PathParameters) throws(ServiceError) -> String {
    guard let id = Identifiers.text(params["externalId"], max: 512), id.count <= 128 else {
        throw ServiceError.invalid("externalId must be 1 to 128 printable characters")
    }
    return id
}

extension RouteTable {
    /// `/admin/v1`: the admin key as bearer; every change audited.
    mutating func addAdminRoutes(_ s: Services) {
        add("GET", "/admin/v1/origins", accepting: .any) { req, _ in
            try s.admin.requireAdmin(req)
            return .json(bytes: try s.admin.listOrigins().serialized())
        }
        add("POST", "/admin/v1/origins") { req, _ in
            try s.admin.requireAdmin(req)
            let (origin, created) = try s.admin.addOrigin(try jsonBody(req))
            return .json(status: created ? 201 : 200, bytes: JSONValue.object([("origin", .string(origin))]).serialized())
        }
        add("DELETE", "/admin/v1/origins/{origin}", accepting: .any) { req, params in
            try s.admin.requireAdmin(req)
            // Only a valid origin was ever added; a segment that cannot be one names nothing.
            guard let origin = Identifiers.text(params["origin"], max: 2048) else { throw ServiceError.notFound("origin") }
            try s.admin.removeOrigin(origin)
            return .empty(status: 204)
        }
        add("POST", "/admin/v1/users/{externalId}/enrolment-tickets") { req, params in
            try s.admin.requireAdmin(req)
            let externalId = try externalUserId(params)
            return .json(status: 201, bytes: try s.admin.enrolmentTicket(externalId: externalId, body: try jsonBody(req)).serialized())
        }
        add("POST", "/admin/v1/users/{externalId}/device-key-tickets", accepting: .any) { req, params in
            try s.admin.requireAdmin(req)
            return .json(status: 201, bytes: try s.admin.deviceKeyTicket(externalId: try externalUserId(params)).serialized())
        }
        add("GET", "/admin/v1/step-up/receipts/{id}", accepting: .any) { req, params in
            // An auditor's copy of any user's step-up receipt (the owner's is /v1/step-up/receipts/{id}).
            try s.admin.requireAdmin(req)
            guard let id = Identifiers.opaque(params["id"]) else { throw ServiceError.notFound("receipt") }
            return .json(bytes: try s.stepUp.receipt(id: id, userId: nil).serialized())
        }
        add("GET", "/admin/v1/audit", accepting: .any) { req, _ in
            try s.admin.requireAdmin(req)
            return .json(bytes: try s.admin.auditLog(limit: req.queryValue("limit"), before: req.queryValue("before")).serialized())
        }
        // Webhooks (SPEC "Events"): endpoints and their deliveries.
        add("POST", "/admin/v1/webhooks") { req, _ in
            try s.admin.requireAdmin(req)
            return .json(status: 201, bytes: try s.webhooks.create(try jsonBody(req)).serialized())
        }
        add("GET", "/admin/v1/webhooks", accepting: .any) { req, _ in
            try s.admin.requireAdmin(req)
            return .json(bytes: try s.webhooks.list().serialized())
        }
        add("DELETE", "/admin/v1/webhooks/{id}", accepting: .any) { req, params in
            try s.admin.requireAdmin(req)
            // A NUL (or any unprintable byte) names no endpoint: 404, never a query that fails.
            guard let id = Identifiers.text(params["id"], max: 64) else { throw ServiceError.notFound("webhook") }
            try s.webhooks.delete(id: id)
            return .empty(status: 204)
        }
        add("GET", "/admin/v1/webhooks/{id}/deliveries", accepting: .any) { req, params in
            try s.admin.requireAdmin(req)
            guard let id = Identifiers.text(params["id"], max: 64) else { throw ServiceError.notFound("webhook") }
            return .json(bytes: try s.webhooks.deliveries(id: id, limit: req.queryValue("limit")).serialized())
        }
    }
}
