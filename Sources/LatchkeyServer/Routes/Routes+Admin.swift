import HTTP
import JSON

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
            try s.admin.removeOrigin(params["origin"] ?? "")
            return .empty(status: 204)
        }
        add("POST", "/admin/v1/users/{externalId}/enrolment-tickets") { req, params in
            try s.admin.requireAdmin(req)
            return .json(status: 201, bytes: try s.admin.enrolmentTicket(externalId: params["externalId"] ?? "", body: try jsonBody(req)).serialized())
        }
        add("POST", "/admin/v1/users/{externalId}/device-key-tickets", accepting: .any) { req, params in
            try s.admin.requireAdmin(req)
            return .json(status: 201, bytes: try s.admin.deviceKeyTicket(externalId: params["externalId"] ?? "").serialized())
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
            try s.webhooks.delete(id: params["id"] ?? "")
            return .empty(status: 204)
        }
        add("GET", "/admin/v1/webhooks/{id}/deliveries", accepting: .any) { req, params in
            try s.admin.requireAdmin(req)
            return .json(bytes: try s.webhooks.deliveries(id: params["id"] ?? "", limit: req.queryValue("limit")).serialized())
        }
    }
}
