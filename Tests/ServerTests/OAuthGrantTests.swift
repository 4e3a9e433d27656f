import Crypto
import Foundation
import JSON
@testable import LatchkeyServer
import Testing
import Tokens

/// SPEC "Tokens": what an approval grants is a typed value (`OAuthGrant`), stored as the JSON whose
/// members the store's statements read by name, and read back the same.
@Suite("OAuth grants, typed")
struct OAuthGrantTests {
    static let request = JSONValue.object([
        ("client_id", "lkc_x"), ("redirect_uri", "https://app.example/cb"), ("scope", "openid email offline_access"), ("state", "s"),
        ("nonce", "n-1"), ("code_challenge", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"), ("prompt", ""), ("max_age", .null),
        ("authorization_details", .array([.object([("type", "payment"), ("amount", "42.00")])])), ("resource", "https://api.example"),
    ])

    @Test("a grant from a checked request: the stored members, and read back equal")
    func fromRequest() throws {
        let authentication = AuthenticationClaims.passkey(userVerified: true, hardware: false).openID
        let grant = OAuthGrant(request: Self.request, authTime: Date(timeIntervalSince1970: 1_700_000_000.9), authentication: authentication,
                               receiptId: "rcpt", credentialId: [1, 2, 3], opSessionId: "browser-1")
        #expect(grant.scopes == ["openid", "email", "offline_access"])
        #expect(grant.authTime == 1_700_000_000)
        #expect(grant.authentication == GrantAuthentication(authTime: 1_700_000_000, acr: authentication.acr, amr: authentication.amr))
        let json = grant.json
        // The members the store's statements read by name (OAuthRepository: redeem, rotate, logout).
        #expect(json["redirect_uri"]?.stringValue == "https://app.example/cb")
        #expect(json["code_challenge"]?.stringValue == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        #expect(json["scope"]?.stringValue == "openid email offline_access")
        #expect(json["auth_time"]?.doubleValue == 1_700_000_000)
        #expect(json["credential_id"]?.stringValue == Base64URL.encode([1, 2, 3]))
        #expect(json["op_sid"]?.stringValue == "browser-1")
        #expect(json["authorization_details"] == Self.request["authorization_details"])
        #expect(json["receipt_id"]?.stringValue == "rcpt" && json["resource"]?.stringValue == "https://api.example")
        #expect(json["nonce"]?.stringValue == "n-1" && json["acr"]?.stringValue == authentication.acr)
        #expect(OAuthGrant(json: json) == grant)
        #expect(OAuthGrant(json: try JSONParser.parse(json.serialized())) == grant, "through the stored text too")
    }

    @Test("a stored grant without PKCE, details, receipt or authentication reads as absent, never as a value")
    func sparse() throws {
        let stored = JSONValue.object([("redirect_uri", "https://app.example/cb"), ("code_challenge", .null), ("scope", "openid"),
                                       ("nonce", .null), ("auth_time", 5), ("authorization_details", .null), ("receipt_id", .null),
                                       ("resource", .null), ("credential_id", .null), ("op_sid", .null)])
        let grant = OAuthGrant(json: stored)
        #expect(grant.codeChallenge == nil && grant.nonce == nil && grant.authorizationDetails == nil && grant.receiptId == nil)
        #expect(grant.resource == nil && grant.credentialId == nil && grant.opSessionId == nil)
        #expect(grant.authentication == nil, "no acr stored: the tokens claim none")
        #expect(grant.scopes == ["openid"])
        #expect(OAuthGrant(json: .object([])).scopes.isEmpty)
    }

    @Test("the code exchange's tokens describe the grant: details and receipt once, auth_time and acr, the resource as audience")
    func exchangeIssuesTheGrant() throws {
        let w = try OAuthWorld()
        let c = try w.client()
        let alice = try w.person("alice")
        let tokens = try w.exchange(c, code: try w.code(c, by: alice))
        let access = try #require(JWT.unverifiedClaims(tokens["access_token"]?.stringValue ?? ""))
        let id = try #require(JWT.unverifiedClaims(tokens["id_token"]?.stringValue ?? ""))
        #expect(access["acr"]?.stringValue != nil && access["acr"] == id["acr"])
        #expect(access["auth_time"] != nil && access["auth_time"] == id["auth_time"])
        #expect(id["nonce"]?.stringValue == "n-1")
        #expect(id["sid"]?.stringValue == alice.browserSession, "the cookie approved: sid is the OP session's")
        let refreshed = try w.refresh(c, tokens["refresh_token"])
        let again = try #require(JWT.unverifiedClaims(refreshed["id_token"]?.stringValue ?? ""))
        #expect(again["nonce"] == nil && again["acr"] == id["acr"] && again["sid"] == id["sid"])
    }
}
