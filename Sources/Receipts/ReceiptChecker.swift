import Crypto
import DeviceKeys
import JSON
import WebAuthn

/// Checks a receipt document offline (SPEC "Evidence"; docs/evidence.md): parses the signed
/// challenge (from `clientDataJSON`'s challenge or `evidence.challenge`), checks each of its fields
/// against `sub`, `evidence.keyBinding`, `display` and `actionHash` (itself SHA-256 of the action's
/// RFC 8785 form), that a passkey's id is in the key binding's `credentialIds` and its `rpId` the
/// evidence's, and that the signature verifies under `approver.publicKey`. Pure: no clock, no I/O,
/// nothing from Latchkey's database. Every check runs and reports; one that cannot run because an
/// earlier input is missing fails with that reason.
public enum ReceiptChecker {
    public struct Check: Sendable, Equatable {
        public let name: String
        public let passed: Bool
        /// What was checked when it passed; why not when it failed.
        public let detail: String

        public init(name: String, passed: Bool, detail: String) {
            self.name = name
            self.passed = passed
            self.detail = detail
        }
    }

    /// The checks, in a fixed order: shape, action hash, challenge, user, key binding, display, action,
    /// signature.
    public static func check(_ receipt: JSONValue) -> [Check] {
        var checks: [Check] = []
        func pass(_ name: String, _ detail: String) { checks.append(Check(name: name, passed: true, detail: detail)) }
        func fail(_ name: String, _ detail: String) { checks.append(Check(name: name, passed: false, detail: detail)) }

        // Shape: the members every later check reads.
        let fields: Fields
        switch Fields.read(receipt) {
        case .success(let f): fields = f; pass("shape", "a version 1 receipt with every member a receipt has")
        case .failure(let why): fail("shape", why.reason); return checks
        }

        // actionHash is SHA-256 of the action's RFC 8785 form.
        let actionHashOK = constantTimeEquals(Digest.sha256(fields.action.canonicalized()), fields.actionHash)
        if actionHashOK { pass("action hash", "actionHash is SHA-256 of the action's RFC 8785 form") } else {
            fail("action hash", "actionHash is not SHA-256 of the action's RFC 8785 form")
        }

        // The signed challenge.
        let challenge: StepUpChallenge
        do { challenge = try StepUpChallenge(parsing: fields.challengeBytes) } catch {
            fail("challenge", "the signed challenge is not a Latchkey step-up challenge: \(error.reason)")
            fail("signature", "not checked: the signed challenge is unreadable")
            return checks
        }
        var challengeProblems: [String] = []
        if challenge.version != fields.challengeVersion {
            challengeProblems.append("it is version \(challenge.version), evidence.challengeVersion says \(fields.challengeVersion)")
        }
        if !constantTimeEquals(challenge.nonce, fields.nonce) { challengeProblems.append("its nonce is not evidence.nonce") }
        let kind: StepUpChallenge.Method = fields.kind == .passkey ? .passkey : .deviceKey
        if challenge.method != kind { challengeProblems.append("it was issued for another method than approver.kind") }
        if challengeProblems.isEmpty {
            pass("challenge", "\"LKSTEPUP\" version \(challenge.version), \(fields.kind.rawValue), nonce as in evidence.nonce")
        } else {
            fail("challenge", "the signed challenge does not match the evidence: " + challengeProblems.joined(separator: "; "))
        }

        if constantTimeEquals(challenge.userHash, Digest.sha256(Array(fields.subject.utf8))) {
            pass("user", "the challenge's user hash is SHA-256 of sub")
        } else {
            fail("user", "the challenge was not issued for sub \(fields.subject)")
        }

        checks.append(keyBindingCheck(fields, challenge: challenge))

        switch (challenge.displayHash, fields.display) {
        case (nil, nil): pass("display", "version 1 challenge: no display was shown or signed")
        case (nil, .some): fail("display", "the receipt has a display but the signed challenge (version 1) binds none")
        case (.some, nil): fail("display", "the signed challenge (version 2) binds a display but the receipt's is null")
        case (let signed?, let shown?):
            if constantTimeEquals(signed, shown.hash) {
                pass("display", "the challenge's display hash is SHA-256 of the display's RFC 8785 form")
            } else {
                fail("display", "the display is not the one the signed challenge binds")
            }
        }

        if constantTimeEquals(challenge.actionHash, fields.actionHash) {
            pass("action", "the challenge's action hash (its last 32 bytes) is actionHash")
        } else {
            fail("action", "the signed challenge binds another action than actionHash")
        }

        checks.append(signatureCheck(fields))
        return checks
    }

    /// Whether every check passed.
    public static func allPassed(_ checks: [Check]) -> Bool { !checks.isEmpty && checks.allSatisfy(\.passed) }

    /// SHA-256 of the receipt's RFC 8785 bytes: its commitment, the leaf the transparency log holds.
    public static func commitment(_ receipt: JSONValue) -> [UInt8] { ReceiptDocument.commitment(of: receipt.canonicalized()) }

    // MARK: Key binding and signature

    static func keyBindingCheck(_ f: Fields, challenge: StepUpChallenge) -> Check {
        let name = "key binding"
        guard constantTimeEquals(challenge.keyHash, Digest.sha256(f.keyBinding)) else {
            return Check(name: name, passed: false, detail: "the challenge's key hash is not SHA-256 of evidence.keyBinding")
        }
        switch f.kind {
        case .deviceKey:
            guard constantTimeEquals(f.keyBinding, f.publicKey) else {
                return Check(name: name, passed: false, detail: "evidence.keyBinding is not approver.publicKey (the device key's SPKI)")
            }
            return Check(name: name, passed: true, detail: "the challenge binds the approver's device key (SPKI)")
        case .passkey:
            guard let binding = try? JSONParser.parse(f.keyBinding), binding["method"]?.stringValue == "passkey",
                  let ids = binding["credentialIds"]?.arrayValue?.compactMap(\.stringValue), let rpId = binding["rpId"]?.stringValue else {
                return Check(name: name, passed: false,
                             detail: "evidence.keyBinding is not {\"credentialIds\",\"method\":\"passkey\",\"rpId\"}")
            }
            guard ids.contains(f.approverId) else {
                return Check(name: name, passed: false, detail: "approver.id is not among the key binding's credentialIds")
            }
            guard rpId == f.rpId else {
                return Check(name: name, passed: false, detail: "the key binding's rpId \(rpId) is not evidence.rpId \(f.rpId ?? "")")
            }
            return Check(name: name, passed: true, detail: "approver.id is one of the \(ids.count) passkeys of \(rpId) the challenge binds")
        }
    }

    static func signatureCheck(_ f: Fields) -> Check {
        let name = "signature"
        func fail(_ why: String) -> Check { Check(name: name, passed: false, detail: why) }
        switch f.kind {
        case .passkey:
            guard let clientData = f.clientData, let rawAuthenticatorData = f.authenticatorData, let rpId = f.rpId else {
                return fail("the passkey evidence is incomplete")
            }
            let key: COSEKey
            do { key = try COSEKey(bytes: f.publicKey) } catch { return fail("approver.publicKey is not a COSE key: \(error.reason)") }
            let authenticatorData: AuthenticatorData
            do { authenticatorData = try AuthenticatorData(rawAuthenticatorData) } catch { return fail(error.reason) }
            guard constantTimeEquals(authenticatorData.rpIdHash, Digest.sha256(Array(rpId.utf8))) else {
                return fail("authenticatorData's rpIdHash is not SHA-256 of \(rpId)")
            }
            guard authenticatorData.userPresent, authenticatorData.userVerified else {
                return fail("authenticatorData does not say the user was present and verified")
            }
            guard clientData.type == CollectedClientData.CeremonyType.get.rawValue else {
                return fail("clientDataJSON is not a webauthn.get client data")
            }
            guard key.verify(signature: f.signature, over: authenticatorData.raw + clientData.hash) else {
                return fail("the signature does not verify under approver.publicKey over authenticatorData ‖ SHA-256(clientDataJSON)")
            }
            return Check(name: name, passed: true, detail: "a user-verified WebAuthn assertion for \(rpId) under approver.publicKey (\(key.algorithm.name))")
        case .deviceKey:
            let key: DevicePublicKey
            do { key = try DevicePublicKey(bytes: f.publicKey) } catch { return fail("approver.publicKey is not a P-256 SPKI: \(error.reason)") }
            let signature: DERSignature
            do { signature = try DERSignature(bytes: f.signature) } catch { return fail("evidence.signature is not a DER ECDSA signature") }
            if let authenticatorData = f.authenticatorData {
                guard let clientDataHash = f.clientDataHash,
                      constantTimeEquals(clientDataHash, Digest.sha256(f.challengeBytes)) else {
                    return fail("App Attest: clientDataHash is not SHA-256 of the challenge")
                }
                guard key.isValidSignature(signature, over: Digest.sha256(authenticatorData + clientDataHash)) else {
                    return fail("App Attest: the signature does not verify under approver.publicKey over SHA-256(authenticatorData ‖ clientDataHash)")
                }
                return Check(name: name, passed: true, detail: "an App Attest assertion over the challenge under approver.publicKey")
            }
            guard key.isValidSignature(signature, over: f.challengeBytes) else {
                return fail("the signature does not verify under approver.publicKey over the challenge")
            }
            return Check(name: name, passed: true, detail: "ECDSA P-256 SHA-256 over the challenge under approver.publicKey")
        }
    }

    // MARK: Reading

    struct Problem: Error { let reason: String }

    /// The members the checks read, decoded.
    struct Fields {
        let kind: ReceiptDocument.ApproverKind
        let subject: String
        let action: JSONValue
        let actionHash: [UInt8]
        let display: StepUpDisplay?
        let approverId: String
        let publicKey: [UInt8]
        let challengeBytes: [UInt8]
        let challengeVersion: Int
        let nonce: [UInt8]
        let keyBinding: [UInt8]
        let signature: [UInt8]
        /// The passkey's `clientDataJSON`, parsed as WebAuthn parses it: the signed challenge is its `challenge`.
        let clientData: CollectedClientData?
        let authenticatorData: [UInt8]?
        let clientDataHash: [UInt8]?
        let rpId: String?

        static func read(_ r: JSONValue) -> Result<Fields, Problem> {
            do throws(Problem) { return .success(try Fields(r)) } catch { return .failure(error) }
        }

        init(_ r: JSONValue) throws(Problem) {
            func string(_ v: JSONValue?, _ name: String) throws(Problem) -> String {
                guard let s = v?.stringValue else { throw Problem(reason: "\(name) is missing or not a string") }
                return s
            }
            func bytes(_ v: JSONValue?, _ name: String) throws(Problem) -> [UInt8] {
                guard let b = Base64URL.decode(try string(v, name)) else { throw Problem(reason: "\(name) is not base64url") }
                return b
            }
            guard r.objectValue != nil else { throw Problem(reason: "the receipt is not a JSON object") }
            guard r["v"]?.intValue == 1 else { throw Problem(reason: "v is not 1") }
            _ = try string(r["id"], "id")
            _ = try string(r["iss"], "iss")
            _ = try string(r["approvedAt"], "approvedAt")
            subject = try string(r["sub"], "sub")
            guard let action = r["action"], action.objectValue != nil else { throw Problem(reason: "action is missing or not an object") }
            self.action = action
            actionHash = try bytes(r["actionHash"], "actionHash")
            guard let display = r["display"] else { throw Problem(reason: "display is missing (null when none was shown)") }
            if display.isNull { self.display = nil } else {
                do { self.display = try StepUpDisplay(receipt: display) } catch { throw Problem(reason: error.reason) }
            }
            guard let approver = r["approver"], approver.objectValue != nil else { throw Problem(reason: "approver is missing") }
            guard let kind = ReceiptDocument.ApproverKind(rawValue: try string(approver["kind"], "approver.kind")) else {
                throw Problem(reason: "approver.kind is not passkey or device-key")
            }
            self.kind = kind
            approverId = try string(approver["id"], "approver.id")
            publicKey = try bytes(approver["publicKey"], "approver.publicKey")
            guard let attestation = approver["attestation"], attestation.isNull || attestation.objectValue != nil else {
                throw Problem(reason: "approver.attestation is missing (null when none)")
            }
            // Present only on a break-glass approval's vote, and then true.
            guard r["breakGlass"] == nil || r["breakGlass"] == .bool(true) else { throw Problem(reason: "breakGlass, when present, is true") }
            guard let e = r["evidence"], e.objectValue != nil else { throw Problem(reason: "evidence is missing") }
            guard let version = e["challengeVersion"]?.intValue else { throw Problem(reason: "evidence.challengeVersion is missing") }
            challengeVersion = version
            nonce = try bytes(e["nonce"], "evidence.nonce")
            keyBinding = try bytes(e["keyBinding"], "evidence.keyBinding")
            signature = try bytes(e["signature"], "evidence.signature")
            switch kind {
            case .passkey:
                let clientDataJSON = try bytes(e["clientDataJSON"], "evidence.clientDataJSON")
                let parsed: CollectedClientData
                do { parsed = try CollectedClientData(raw: clientDataJSON) } catch { throw Problem(reason: "evidence.clientDataJSON: \(error.reason)") }
                clientData = parsed
                authenticatorData = try bytes(e["authenticatorData"], "evidence.authenticatorData")
                rpId = try string(e["rpId"], "evidence.rpId")
                clientDataHash = nil
                challengeBytes = parsed.challenge
            case .deviceKey:
                challengeBytes = try bytes(e["challenge"], "evidence.challenge")
                clientData = nil
                rpId = nil
                if e["authenticatorData"] != nil {
                    authenticatorData = try bytes(e["authenticatorData"], "evidence.authenticatorData")
                    clientDataHash = try bytes(e["clientDataHash"], "evidence.clientDataHash")
                } else {
                    authenticatorData = nil
                    clientDataHash = nil
                }
            }
        }
    }
}
