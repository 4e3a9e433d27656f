import CBOR
import Crypto
import WebAuthn

/// `android-key` (WebAuthn L3 §8.4): Android Keystore certifies the credential key itself. The leaf
/// of x5c is a certificate for the authenticator's credential key carrying the key description
/// extension (1.3.6.1.4.1.11129.2.1.17) whose attestationChallenge is the clientDataHash; sig is the
/// credential key's signature over authenticatorData || clientDataHash.
public struct AndroidKeyAttestationBuilder: AttestationStatementBuilder {
    /// Issues the leaf (an intermediate of the test vendor's root, like a device's batch CA).
    public var ca: TestCertificateAuthority
    /// x5c after the leaf (the CA's certificate unless a test changes it).
    public var rest: [Certificate]
    /// Write this challenge in the key description instead of the real clientDataHash.
    public var challengeOverride: [UInt8]? = nil
    /// Certify this key instead of the credential key.
    public var certifiedKey: PrivateKey? = nil
    /// Put the leaf after the CA certificate (incorrect order).
    public var reverseChain = false
    public let format = "android-key"

    public init(ca: TestCertificateAuthority) {
        self.ca = ca
        rest = [ca.certificate]
    }

    /// KeyDescription with origin KM_ORIGIN_GENERATED and purpose KM_PURPOSE_SIGN in teeEnforced.
    public static func keyDescription(challenge: [UInt8]) -> [UInt8] {
        let tee = DERWriter.sequence(DERWriter.explicit(1, DERWriter.set(DERWriter.integer(2))),
                                     DERWriter.explicit(702, DERWriter.integer(0)))
        return DERWriter.sequence(DERWriter.integer(3), DERWriter.enumerated(1), DERWriter.integer(4), DERWriter.enumerated(1),
                                  DERWriter.octetString(challenge), DERWriter.octetString([]), DERWriter.sequence(), tee)
    }

    public func statement(authenticatorData: [UInt8], clientDataHash: [UInt8], authenticator: SoftAuthenticator) -> [CBORPair] {
        let description = Certificate.Extension(oid: "1.3.6.1.4.1.11129.2.1.17", critical: false,
                                                derValue: Self.keyDescription(challenge: challengeOverride ?? clientDataHash))
        let (_, leaf) = ca.leaf(subject: [("CN", "Android Keystore Key")], key: certifiedKey ?? authenticator.privateKey,
                                extensions: [description])
        let sig = authenticator.sign(authenticatorData + clientDataHash)
        let chain = reverseChain ? rest + [leaf] : [leaf] + rest
        return [CBORPair(.text("alg"), .int(authenticator.algorithm.rawValue)), CBORPair(.text("sig"), .bytes(sig)),
                CBORPair(.text("x5c"), .array(chain.map { .bytes($0.der) }))]
    }
}
