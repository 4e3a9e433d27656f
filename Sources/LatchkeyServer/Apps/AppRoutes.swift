import HTTP
import JSON
import WellKnown

extension RouteTable {
    /// `/admin/v1/apps`: associated native apps (admin key or admin user; every change audited, and
    /// with a user token approved by step-up). `GET` → `{"apps":[…]}`; `POST` a declaration → 201 the
    /// app (200 when it replaced or matched one with the same id); `DELETE /admin/v1/apps/{ios:TEAMID.bundle.id |
    /// android:package}` → 204, 404 when absent. `POST /admin/v1/wellknown/preview` reads only.
    mutating func addAppRoutes(_ s: Services) {
        // Both reads ride with an admin user's role and standing (`GuardLoads.adminPage`).
        add("GET", "/admin/v1/apps", .admin, accepting: .any, preload: { _, _ in .adminPage(s.admin.appsRead) }) { ctx in
            .json(bytes: AppRenderer.apps(try s.admin.listApps(loaded: ctx.loads.adminPage)).serialized())
        }
        add("POST", "/admin/v1/apps", .admin, stepUp: .adminChange(checking: { [policy = s.admin.policy] body throws(ServiceError) in
            _ = try AdminService.checkedApp(body, policy)
        })) { ctx in
            let (app, created) = try s.admin.putApp(try ctx.json(), by: try ctx.admin())
            return .json(status: created ? 201 : 200, bytes: AppRenderer.app(app).serialized())
        }
        add("DELETE", "/admin/v1/apps/{id:text}", .admin, stepUp: .adminChange, accepting: .any) { ctx in
            try s.admin.removeApp(try ctx.path.text("id"), by: try ctx.admin())
            return .empty(status: 204)
        }
        // The console's live preview: what the three files and `wellknown check` would say with this
        // declaration (or as things are, for `{}`); a body it refuses preloads nothing.
        add("POST", "/admin/v1/wellknown/preview", .admin, preload: { request, _ in
            do {
                _ = try Self.previewCandidate(try jsonBody(request))
                return .adminPage(s.wellKnown.previewRead)
            } catch {
                return nil
            }
        }) { ctx in
            .json(bytes: AppRenderer.preview(try s.wellKnown.preview(candidate: try Self.previewCandidate(try ctx.json()),
                                                                     loaded: ctx.loads.adminPage)).serialized())
        }
    }

    /// The app a preview's body declares (`{"app": …}`), nil for none; 400 for one that is not a declaration.
    static func previewCandidate(_ body: JSONValue) throws(ServiceError) -> AssociatedApp? {
        try body["app"].flatMap { $0.isNull ? nil : $0 }.map { v throws(ServiceError) in try AppDeclarations.parse(v) }
    }
}
