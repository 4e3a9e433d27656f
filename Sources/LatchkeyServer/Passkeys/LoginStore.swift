import Foundation
import PostgreSQL
import Storage
import WebAuthn

/// A passkey sign-in's storage (SPEC "Performance targets": options write nothing, a login is one
/// commit): the username-first options' one read, and the verify's one transaction — the read
/// (the challenge's use, the credential with its owner), then the one statement `decide` gives,
/// which records the challenge's id used together with everything else it writes (the counter's
/// compare-and-set, the session, audit, events, the language memo). `LoginRepository` in the
/// server; an in-memory store in the service tests.
protocol LoginStore: Sendable {
    /// The account and its live passkeys (id, transports), oldest first, by the same statement
    /// whether or not the username exists. Nil: no such account.
    func account(username: String) throws(StorageError) -> (userId: String, credentials: [(id: [UInt8], transports: [String])])?
    /// A challenge used before, or expired, is `.challengeUnusable` with nothing written. A use whose
    /// counter lost the compare-and-set under `.reject` is `.conflict(.signCountRegression)` (the
    /// challenge stays used); a credential gone meanwhile `.notFound`.
    func login(_ challenge: UsedChallenge, credentialId: [UInt8], decide: (LoginRead) -> LoginWrite) throws(StorageError) -> LoginWritten
}

extension LoginRepository: LoginStore {}

/// The same reads and writes from a task on an event loop: each round trip suspends the task on
/// the loop instead of blocking a thread (`LoopLogins`: `LoginRepository` over the loop's connections).
protocol LoopLoginStore: Sendable {
    func account(username: String) async throws(StorageError) -> (userId: String, credentials: [(id: [UInt8], transports: [String])])?
    func login(_ challenge: UsedChallenge, credentialId: [UInt8], decide: (LoginRead) -> LoginWrite) async throws(StorageError) -> LoginWritten
}

struct LoopLogins: LoopLoginStore {
    let repository: LoginRepository
    let connections: LoopConnections

    func account(username: String) async throws(StorageError) -> (userId: String, credentials: [(id: [UInt8], transports: [String])])? {
        try await repository.account(username: username, on: connections)
    }

    func login(_ challenge: UsedChallenge, credentialId: [UInt8], decide: (LoginRead) -> LoginWrite) async throws(StorageError) -> LoginWritten {
        try await repository.login(challenge, credentialId: credentialId, on: connections, decide: decide)
    }
}

/// What a ceremony reads of the authenticator metadata in use (`MetadataStore`): the policy a
/// registration applies, and a statement's description and icon for a passkey's provider.
protocol PasskeyMetadata: Sendable {
    func policy() -> MetadataPolicy
    func description(aaguid: [UInt8]) -> String?
    func icon(aaguid: [UInt8]) -> ProviderIcon?
}

extension MetadataStore: PasskeyMetadata {}
