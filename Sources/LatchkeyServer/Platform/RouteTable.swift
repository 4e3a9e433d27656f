import EventLoop
import HTTP

/// Collects routes, each with its guard (SPEC "Assurance", RouteGuard.swift): who may call it, the
/// step-up its change needs and the kind of each path parameter. The guard runs before the
/// handler; every `ServiceError` becomes RFC 9457 problem+json with SPEC's code, and anything
/// unexpected a 503 problem (never a crash, never a stack trace).
struct RouteTable {
    /// What the guards look up (the callers, and what the step-up rules read); nothing else.
    let lookups: any GuardLookups
    var router = Router()
    /// Every route as declared (for the sweep that proves each one's guard).
    private(set) var declared: [GuardedRoute] = []

    init(services: Services) { lookups = ServiceLookups(services) }

    init(lookups: any GuardLookups) { self.lookups = lookups }

    /// Registers `handler` for `method` on `declared` (`/v1/passkeys/{id:credential}`), callable by
    /// `access`, with `stepUp` for its change; `available` false → 404 (a feature this deployment has off);
    /// `preload`: what the caller's resolution may read for the handler (`GuardedRoute.preload`).
    mutating func add(_ method: String, _ pattern: String, _ access: Access, stepUp: StepUpRule? = nil,
                      accepting: AcceptedBody = .json, available: Bool = true,
                      preload: (@Sendable (Request, PathParameters) -> GuardPreload?)? = nil,
                      _ handler: @escaping @Sendable (RouteContext) throws -> Response,
                      onLoop: (@Sendable (RouteContext, EventLoop) async throws(ServiceError) -> Response)? = nil) {
        let (routerPattern, kinds) = GuardedRoute.split(pattern)
        let route = GuardedRoute(method: method, pattern: routerPattern, access: access, stepUp: stepUp, kinds: kinds, available: available,
                                 preload: preload)
        declared.append(route)
        let lookups = lookups
        // A route with a handler for the event loop answers there the same way: the same guard,
        // the same errors, the same settling of a DPoP proof.
        let loopHandler = onLoop.map { Self.onLoop(route, lookups, $0) }
        router.add(method, routerPattern, accepting: accepting, handler: { request, params in
            let response: Response
            do {
                response = try handler(try Self.context(route, request, params, lookups))
            } catch let error as ServiceError {
                response = error.response
            } catch {
                response = ServiceError(.internalError, "unexpected failure").response
            }
            return Self.settled(response, lookups)
        }, onLoop: loopHandler)
    }

    /// What the guard admits `request` with, or the error that refuses it (a route this deployment
    /// has off is 404).
    private static func context(_ route: GuardedRoute, _ request: Request, _ params: PathParameters,
                                _ lookups: any GuardLookups) throws(ServiceError) -> RouteContext {
        guard route.available else { throw ServiceError.notFound("resource") }
        return try route.check(request, params, lookups)
    }

    /// A DPoP proof's jti rides in the route's one write (RFC 9449 §11.1): a replay is refused
    /// whatever the route answered, having written nothing.
    private static func settled(_ response: Response, _ lookups: any GuardLookups) -> Response {
        lookups.settleProof()?.response ?? response
    }

    private static func onLoop(_ route: GuardedRoute, _ lookups: any GuardLookups,
                               _ handler: @escaping @Sendable (RouteContext, EventLoop) async throws(ServiceError) -> Response) -> Router.LoopHandler {
        { @Sendable (request: Request, params: PathParameters) async -> Response in
            var response: Response
            do throws(ServiceError) {
                let context = try Self.context(route, request, params, lookups)
                guard let loop = EventLoop.current else { throw ServiceError(.internalError, "a loop handler off its loop") }
                response = try await handler(context, loop)
            } catch {
                response = error.response
            }
            return Self.settled(response, lookups)
        }
    }
}
