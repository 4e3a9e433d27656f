import Crypto
import DeviceKeys
import Foundation
import Storage
import Synchronization
import WellKnown

/// What a device key's attestation must chain to and be bound to (SPEC "Trust chain": Attested
/// keys, Policy): the shipped roots or `LATCHKEY_ATTESTATION_ROOTS`, the revocation status list
/// `LATCHKEY_ATTESTATION_STATUS`, and the apps declared for this rpId — the same list that feeds
/// `assetlinks.json`, the AASA file and the origin allowlist.
final class AttestationTrust: Sendable {
    let config: ConfigRepository
    let configuration: Configuration
    let runtime: Runtime
    private let loaded = Mutex<(anchors: [Certificate], statusList: AttestationStatusList)?>(nil)

    init(config: ConfigRepository, configuration: Configuration, runtime: Runtime) {
        self.config = config
        self.configuration = configuration
        self.runtime = runtime
    }

    struct LoadError: Error, CustomStringConvertible { let description: String }

    /// Start-up step: reads the roots and the status list once; a bad file stops the start.
    func load() throws(LoadError) {
        var anchors = DeviceKeyAttestationPolicy.shippedRoots
        if let folder = configuration.attestationRootsDirectory {
            anchors = []
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.hasSuffix(".pem") }.sorted()
            for name in names {
                guard let data = FileManager.default.contents(atPath: folder + "/" + name) else {
                    throw LoadError(description: "LATCHKEY_ATTESTATION_ROOTS: cannot read \(name)")
                }
                do { anchors += try Certificate.parsePEM(String(decoding: data, as: UTF8.self)) } catch {
                    throw LoadError(description: "LATCHKEY_ATTESTATION_ROOTS: \(name) holds no readable certificate")
                }
            }
            guard !anchors.isEmpty else { throw LoadError(description: "LATCHKEY_ATTESTATION_ROOTS: no .pem certificate in \(folder)") }
        }
        var statusList = AttestationStatusList.empty
        if let path = configuration.attestationStatusFile {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw LoadError(description: "LATCHKEY_ATTESTATION_STATUS: cannot read \(path)")
            }
            do { statusList = try AttestationStatusList(json: [UInt8](data)) } catch {
                throw LoadError(description: "LATCHKEY_ATTESTATION_STATUS: \(error.reason)")
            }
        }
        loaded.withLock { $0 = (anchors, statusList) }
    }

    /// The policy for one enrolment, at the runtime's clock, with the apps as declared now.
    func policy() throws(ServiceError) -> DeviceKeyAttestationPolicy {
        let trust = loaded.withLock { $0 } ?? (DeviceKeyAttestationPolicy.shippedRoots, .empty)
        var policy = DeviceKeyAttestationPolicy(trustAnchors: trust.anchors, now: runtime.unixTime)
        policy.statusList = trust.statusList
        policy.requireVerifiedBoot = configuration.requireVerifiedBoot
        policy.appAttestDevelopment = configuration.appAttestDevelopment
        let rows = try storage { () throws(StorageError) in try config.apps(rpId: configuration.rpId) }
        for app in AppDeclarations.apps(rows) {
            switch app {
            case .android(let a):
                policy.androidApps.append(AndroidAppIdentity(packageName: a.packageName, signatureDigests: a.fingerprints.map(\.bytes)))
            case .ios(let a):
                policy.iosApps.append(a.appID)
            }
        }
        return policy
    }
}
