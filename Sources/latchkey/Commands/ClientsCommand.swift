import Foundation
import JSON
import LatchkeyServer
import Storage

/// `latchkey clients add|list|remove`: OpenID clients (SPEC "OpenID Provider", "Clients"), straight
/// in PostgreSQL (DATABASE_URL); every change is in the audit log with actor `cli`.
enum ClientsCommand: Command {
    static let name = "clients"
    static let summary = "add, list or remove OpenID clients (DATABASE_URL)"
    static let help = """
        usage: latchkey clients add <name> --redirect-uri U [--redirect-uri U …] [--public]
                                    [--post-logout-redirect-uri U …] [--jwks-uri U]
                                    [--authorization-details-type T …] [--id-token-alg ES256|RS256]
                                    [--auth-method client_secret_basic|client_secret_post|private_key_jwt|none]
                                    [--pkce required|optional] [--dpop required] [--profile fapi2]
                                    [--grant-type ciba --ciba-mode poll|ping [--ciba-notification-endpoint U]
                                     [--ciba-approver attested-device-key|device-key|passkey]]
               latchkey clients list
               latchkey clients remove <client_id>

        add     registers a client and prints `client_id: <id>` and, for a confidential client,
                `client_secret: <secret>` (shown this once; stored hashed). --public: a native or
                browser app without a secret (token endpoint auth `none`; loopback and private-use
                scheme redirect URIs). --jwks-uri: the client authenticates with private_key_jwt
                (and gets no secret). --auth-method: the one method the token endpoint accepts
                from it (default client_secret_basic; none for --public). --pkce optional: a
                confidential client may leave PKCE out, and then must send a nonce. --dpop
                required: every token request must carry a DPoP proof (RFC 9449). --profile
                fapi2: the FAPI 2.0 Security Profile (a confidential private_key_jwt client, PKCE;
                not with --public or --id-token-alg RS256): PAR, DPoP with server nonces, refresh
                tokens that do not rotate; the profile's metadata is printed after the id.
                --grant-type ciba: the client may ask for approvals on the backchannel (CIBA,
                confidential clients only), learning the result by polling the token endpoint
                (--ciba-mode poll, the default) or by a POST to --ciba-notification-endpoint
                (ping); --ciba-approver: the key whose step-up approves (default
                attested-device-key; device-key allows an unattested one; passkey).
        list    one client a line: id, name, public or confidential, redirect URIs.
        remove  deletes the client and ends every session it holds.
        Exit status: 0 done, 1 refused (invalid or unknown), 64 bad usage.
        """

    static func run(_ arguments: [String]) -> Int32 {
        let args: ParsedArguments
        do {
            args = try ParsedArguments(arguments, valued: ["redirect-uri", "post-logout-redirect-uri", "jwks-uri", "authorization-details-type",
                                                           "id-token-alg", "auth-method", "pkce", "grant-type", "ciba-mode",
                                                           "ciba-notification-endpoint", "ciba-approver", "dpop", "profile"], flags: ["help", "public"])
        } catch { printError("latchkey clients: \(error.message)\n\n\(help)"); return ExitCode.usage }
        if args.has("help") { print(help); return ExitCode.success }
        let verb = args.positionals.first
        switch verb {
        case "add":
            guard args.positionals.count == 2, !args.all("redirect-uri").isEmpty else {
                printError("latchkey clients: add needs a name and at least one --redirect-uri\n\n\(help)"); return ExitCode.usage
            }
        case "remove":
            guard args.positionals.count == 2 else { printError("latchkey clients: remove needs a client_id\n\n\(help)"); return ExitCode.usage }
        case "list":
            guard args.positionals.count == 1 else { printError("latchkey clients: list takes no arguments\n\n\(help)"); return ExitCode.usage }
        default: printError("latchkey clients: say add, list or remove\n\n\(help)"); return ExitCode.usage
        }
        var authMethod: OAuthClientAuthMethod? = nil
        if let named = args.value("auth-method") {
            guard let method = OAuthClientAuthMethod(rawValue: named) else {
                printError("latchkey clients: --auth-method must be client_secret_basic, client_secret_post, private_key_jwt or none"); return ExitCode.usage
            }
            authMethod = method
        }
        let pkce = args.value("pkce") ?? "required"
        guard pkce == "required" || pkce == "optional" else { printError("latchkey clients: --pkce must be required or optional"); return ExitCode.usage }
        let dpop = args.value("dpop")
        guard dpop == nil || dpop == "required" else { printError("latchkey clients: --dpop must be required"); return ExitCode.usage }
        var profile: OAuthClientProfile? = nil
        if let named = args.value("profile") {
            guard let p = OAuthClientProfile(rawValue: named) else { printError("latchkey clients: --profile must be fapi2"); return ExitCode.usage }
            profile = p
        }
        if verb == "add" {
            var r = OAuthClientService.Registration(name: args.positionals[1], redirectURIs: args.all("redirect-uri"))
            (r.isPublic, r.jwksURI, r.authMethod, r.pkceRequired) = (args.has("public"), args.value("jwks-uri"), authMethod, pkce == "required")
            (r.idTokenAlg, r.profile) = (args.value("id-token-alg") ?? "ES256", profile)
            do throws(ServiceError) {
                r.ciba = try OAuthClientService.cibaRegistration(grantTypes: args.all("grant-type"), mode: args.value("ciba-mode"),
                                                                 endpoint: args.value("ciba-notification-endpoint"),
                                                                 approver: args.value("ciba-approver"))
                _ = try OAuthClientService.authMethod(r)
            } catch {
                printError("latchkey clients: \(error.detail)"); return ExitCode.usage
            }
        }
        let configuration: Configuration
        do { configuration = try Configuration.fromEnvironment() } catch { printError("latchkey clients: \(error)"); return ExitCode.usage }
        return withDatabase("latchkey clients", unset: "DATABASE_URL is not set\n\n\(help)") { database, _ in
            let clients = OAuthClientService(database: database, configuration: configuration)
            do throws(ServiceError) {
                switch verb {
                case "add":
                    var r = OAuthClientService.Registration(name: args.positionals[1], redirectURIs: args.all("redirect-uri"))
                    r.isPublic = args.has("public")
                    r.postLogoutRedirectURIs = args.all("post-logout-redirect-uri")
                    r.jwksURI = args.value("jwks-uri")
                    r.authorizationDetailsTypes = args.all("authorization-details-type")
                    r.idTokenAlg = args.value("id-token-alg") ?? "ES256"
                    r.authMethod = authMethod
                    r.pkceRequired = pkce == "required"
                    r.ciba = try OAuthClientService.cibaRegistration(grantTypes: args.all("grant-type"), mode: args.value("ciba-mode"),
                                                                     endpoint: args.value("ciba-notification-endpoint"),
                                                                     approver: args.value("ciba-approver"))
                    r.dpopRequired = dpop == "required"
                    r.profile = profile
                    let created = try clients.add(r, by: .named("cli"))
                    print("client_id: \(created.client.id)")
                    if let secret = created.secret { print("client_secret: \(secret)") }
                    // SPEC "FAPI 2.0": the registration describes the profile (RFC 7591 names).
                    for (name, value) in OAuthClientService.profileMetadata(created.client) { print("\(name): \(value.stringValue ?? value.text)") }
                case "list":
                    for c in try clients.list() {
                        print("\(c.id)  \(c.name)  \(c.isPublic ? "public" : "confidential")  \(c.redirectURIs.joined(separator: " "))")
                    }
                default:
                    _ = try clients.remove(id: args.positionals[1], by: .named("cli"))
                    print("removed \(args.positionals[1])")
                }
                return ExitCode.success
            } catch {
                printError("latchkey clients: \(error.detail)")
                return ExitCode.failure
            }
        }
    }
}
