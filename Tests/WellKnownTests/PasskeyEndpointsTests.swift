import JSON
import Testing
import WellKnown

@Suite struct PasskeyEndpointsTests {
    @Test("the document names the web app's enrol, manage and PRF pages on the first web origin")
    func document() {
        let origin = PasskeyEndpoints.firstWebOrigin(["android:apk-key-hash:abc", "https://app.example.com", "https://id.example.com"])
        #expect(origin == "https://app.example.com")
        #expect(String(decoding: PasskeyEndpoints.bytes(webOrigin: "https://app.example.com/"), as: UTF8.self)
            == #"{"enroll":"https://app.example.com/?enroll=passkey","manage":"https://app.example.com/#passkeys","prfUsageDetails":"https://app.example.com/help/vault"}"#)
        #expect(PasskeyEndpoints.firstWebOrigin(["ios:bundle-id:x"]) == nil)
    }
}
