import Foundation
import Storage

/// Everything the vault reads and writes (SPEC "Portability" → "A vault the server cannot read"):
/// one read for `GET /v1/vault` (the vault with the caller's session as it stands), and one
/// statement per change, with its audit line and the step-up it redeems. `VaultRepository` in
/// PostgreSQL; `InMemoryVaultStore` keeps the same rules in the service tests (the vault once, a
/// wrap only for a live passkey of the account, the step-up used once and spent only on a change
/// that happens, a revoked passkey's wrap gone with it).
protocol VaultStore: Sendable {
    func read(userId: String, sessionId: String) throws(StorageError) -> VaultRead
    /// False: the account has a vault already (nothing written).
    func create(userId: String, prfSalt: [UInt8], audit: AuditRecord) throws(StorageError) -> Bool
    func wrap(userId: String, credentialId: [UInt8], wrappedKey: [UInt8], audit: AuditRecord,
              redeeming: StepUpRedemption) throws(StorageError) -> VaultChange
    func setRecovery(userId: String, wrappedKey: [UInt8], audit: AuditRecord, redeeming: StepUpRedemption) throws(StorageError) -> VaultChange
}

extension VaultRepository: VaultStore {}
