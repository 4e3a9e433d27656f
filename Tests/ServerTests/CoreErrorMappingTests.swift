import DeviceKeys
import LatchkeyServer
import Testing
import WebAuthn

/// The protocol core's refusals reach the wire under their own names: every `CoreError` code is the
/// SPEC code of the same spelling (the one exception, `metadata_invalid`, is no SPEC code and stays
/// `invalid_request`, as when the codes were matched by string).
@Suite struct CoreErrorMappingTests {
    @Test(arguments: CoreError.Code.Kind.allCases)
    func coreCodeKeepsItsWireCode(_ kind: CoreError.Code.Kind) {
        let error = ServiceError(CoreError(CoreError.Code(kind), "why"))
        #expect(error.code.rawValue == (kind == .metadataInvalid ? "invalid_request" : kind.rawValue))
        #expect(error.detail == "why")
    }

    @Test func bothModulesNameTheOneType() {
        let webAuthn: WebAuthnError = WebAuthnError(.challengeInvalid, "a")
        let deviceKey: DeviceKeyError = DeviceKeyError(.actionMismatch, "b")
        #expect(ServiceError(webAuthn).code == .challengeInvalid)
        #expect(ServiceError(deviceKey).code == .actionMismatch)
        #expect(ServiceError(deviceKey).status == 400)
    }
}
