import HTTP
import JSON

extension RouteTable {
    /// `/admin/v1/apps`: associated native apps (admin key as bearer; every change audited).
    /// `GET` → `{"apps":[…]}`; `POST` a declaration → 201 the app (200 when it replaced or matched
    /// one with the same id); `DELETE /admin/v1/apps/{ios:TEAMID.bundle.id | android:package}` → 204, 404 when absent.
    mutating func addAppRoutes(_ s: Services) {
        add("GET", "/admin/v1/apps", accepting: .any) { req, _ in
            try s.admin.requireAdmin(req)
            return .json(bytes: try s.admin.listApps().serialized())
        }
        add("POST", "/admin/v1/apps") { req, _ in
            try s.admin.requireAdmin(req)
            let (app, created) = try s.admin.putApp(try jsonBody(req))
            return .json(status: created ? 201 : 200, bytes: app.serialized())
        }
        add("DELETE", "/admin/v1/apps/{id}", accepting: .any) { req, params in
            try s.admin.requireAdmin(req)
            try s.admin.removeApp(params["id"] ?? "")
            return .empty(status: 204)
        }
    }
}
