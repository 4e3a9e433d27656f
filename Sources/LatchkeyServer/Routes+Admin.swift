import HTTP
import JSON
import PostgreSQL
import Storage

extension RouteTable {
    /// `/admin/v1`: the admin key as bearer; every change audited.
    mutating func addAdminRoutes(_ s: Services) {
        add("GET", "/admin/v1/origins", accepting: .any) { req, _ in
            try s.requireAdmin(req)
            return .json(bytes: try s.listOrigins().serialized())
        }
        add("POST", "/admin/v1/origins") { req, _ in
            try s.requireAdmin(req)
            let (origin, created) = try s.addOrigin(try jsonBody(req))
            return .json(status: created ? 201 : 200, bytes: JSONValue.object([("origin", .string(origin))]).serialized())
        }
        add("DELETE", "/admin/v1/origins/{origin}", accepting: .any) { req, params in
            try s.requireAdmin(req)
            try s.removeOrigin(params["origin"] ?? "")
            return .empty(status: 204)
        }
        add("POST", "/admin/v1/users/{externalId}/enrolment-tickets") { req, params in
            try s.requireAdmin(req)
            return .json(status: 201, bytes: try s.enrolmentTicket(externalId: params["externalId"] ?? "", body: try jsonBody(req)).serialized())
        }
        add("GET", "/admin/v1/audit", accepting: .any) { req, _ in
            try s.requireAdmin(req)
            return .json(bytes: try s.auditLog(limit: req.queryValue("limit"), before: req.queryValue("before")).serialized())
        }
    }

    /// Health, readiness, metrics and the association files (the web app: Routes+Web.swift).
    mutating func addOperationsRoutes(_ s: Services) {
        for name in ["apple-app-site-association", "assetlinks.json", "webauthn"] {
            add("GET", "/.well-known/\(name)", accepting: .any) { _, _ in try s.wellKnown(name) }
        }
        add("GET", "/healthz", accepting: .any) { _, _ in .json(bytes: Array(#"{"status":"ok"}"#.utf8)) }
        add("GET", "/readyz", accepting: .any) { _, _ in
            guard s.store.ping() else { throw ServiceError("internal_error", "database unreachable") }
            return .json(bytes: Array(#"{"status":"ready"}"#.utf8))
        }
        add("GET", "/metrics", accepting: .any) { _, _ in
            let st = s.store.pool.stats
            return .text(s.metrics.render(pool: (st.open, st.inUse, st.waiting)), contentType: "text/plain; version=0.0.4; charset=utf-8")
        }
    }
}
