import Crypto
import Foundation
import Storage

/// The CSV import format (SPEC "Portability" → Import): a header row naming the columns
/// `username,userHandle,credentialId,publicKey,signCount,alg` (in any order, no other), then one
/// passkey a row, RFC 4180 quoting. Rows with one username are one account; `publicKey` is a COSE
/// key or an SPKI one (base64url), `alg` the COSE algorithm id (required with SPKI, which is then
/// converted to COSE). The file names no rpId: it is `--rp-id` when given, else this
/// deployment's. Pure.
enum PortableCSV {
    static let columns = ["username", "userHandle", "credentialId", "publicKey", "signCount", "alg"]

    struct Record {
        let line: Int
        let fields: [String]
    }

    static func read(_ bytes: [UInt8], _ context: PortableFormat.Context) -> PortableFormat.Read {
        guard let records = parse(bytes) else { return .refused("malformed_csv") }
        guard let header = records.first, Set(header.fields).count == columns.count, Set(header.fields) == Set(columns) else {
            return .refused("wrong_columns")
        }
        let index = Dictionary(uniqueKeysWithValues: header.fields.enumerated().map { ($1, $0) })
        // An account's rows, in the order its username first appears.
        var order: [String] = []
        var rows: [String: [Record]] = [:]
        var badRows: [(line: Int, reason: String)] = []
        for record in records.dropFirst() {
            guard record.fields.count == columns.count else {
                // A row of another width: the columns of its account cannot be told, so it is its own refusal.
                badRows.append((record.line, "wrong_column_count"))
                continue
            }
            let username = record.fields[index["username"]!]
            if rows[username] == nil { order.append(username) }
            rows[username, default: []].append(record)
        }
        let rpId = context.statedRpId ?? context.rpId
        var entries = order.map { name in
            let group = rows[name]!
            return PortableEntry(line: group[0].line, account: account(name, group, index: index, rpId: rpId, context))
        }
        entries += badRows.map { PortableEntry(line: $0.line, account: .failure(.init(reason: $0.reason, username: nil))) }
        entries.sort { $0.line < $1.line }
        return .accounts(sha256: Hex.encode(Digest.sha256(bytes)), entries)
    }

    /// One account from its rows, whole or refused with the first reason: `rp_id_mismatch`,
    /// `invalid_username`, `invalid_user_handle`, `two_user_handles`, `invalid_credential_id`,
    /// `duplicate_credential_id`, `invalid_sign_count`, `invalid_alg`, `alg_required`,
    /// `alg_mismatch`, `invalid_public_key`.
    static func account(_ username: String, _ group: [Record], index: [String: Int], rpId: String,
                        _ context: PortableFormat.Context) -> Result<PortableAccount, PortableFile.Refusal> {
        func refuse(_ reason: String) -> Result<PortableAccount, PortableFile.Refusal> { .failure(.init(reason: reason, username: username)) }
        guard rpId == context.rpId else { return refuse("rp_id_mismatch") }
        guard !username.isEmpty else { return refuse("invalid_username") }
        let createdAt = PortableBytes.time(context.now)
        var handles = Set<[UInt8]>()
        var ids = Set<[UInt8]>()
        var passkeys: [PortablePasskey] = []
        for row in group {
            func field(_ name: String) -> String { row.fields[index[name]!] }
            guard let handle = Base64URL.decode(field("userHandle")), (1...64).contains(handle.count) else { return refuse("invalid_user_handle") }
            handles.insert(handle)
            guard let credentialId = PortableBytes.decodeEither(field("credentialId")), credentialId.count <= 1023 else {
                return refuse("invalid_credential_id")
            }
            guard ids.insert(credentialId).inserted else { return refuse("duplicate_credential_id") }
            guard let count = Int(field("signCount")), (0...Int(UInt32.max)).contains(count) else { return refuse("invalid_sign_count") }
            let algText = field("alg")
            let alg: Int?
            if algText.isEmpty { alg = nil } else {
                guard let value = Int(algText) else { return refuse("invalid_alg") }
                alg = value
            }
            guard let keyBytes = PortableBytes.decodeEither(field("publicKey")) else { return refuse("invalid_public_key") }
            let key: (cose: [UInt8], alg: Int)
            switch PortableBytes.credentialKey(keyBytes, alg: alg) {
            case .success(let k): key = k
            case .failure(let refusal): return refuse(refusal.reason)
            }
            passkeys.append(PortablePasskey(credentialId: credentialId, publicKey: key.cose, alg: key.alg, signCount: Int64(count),
                                            transports: [], aaguid: Array(repeating: 0, count: 16), backupEligible: false,
                                            backedUp: false, name: "Imported passkey", createdAt: createdAt, lastUsedAt: nil))
        }
        guard handles.count == 1, let handle = handles.first else { return refuse("two_user_handles") }
        return .success(PortableAccount(id: PortableBytes.userId(handle: handle), username: username, displayName: username,
                                        externalId: nil, createdAt: createdAt, userHandle: handle, email: nil, passkeys: passkeys,
                                        deviceKeys: []))
    }

    /// RFC 4180 records, each with the line it starts on; nil for text that is not UTF-8 or a
    /// quote out of place (unclosed, or inside an unquoted field). Lines end in CRLF or LF; a
    /// blank line is no record; a UTF-8 byte order mark is skipped.
    static func parse(_ bytes: [UInt8]) -> [Record]? {
        var input = bytes[...]
        if input.starts(with: [0xEF, 0xBB, 0xBF]) { input = input.dropFirst(3) }
        var records: [Record] = []
        var fields: [String] = []
        var field: [UInt8] = []
        var line = 1, recordLine = 1
        var quoted = false, wasQuoted = false
        func endField() -> Bool {
            guard let text = String(validating: field, as: UTF8.self) else { return false }
            fields.append(text)
            field.removeAll(keepingCapacity: true)
            wasQuoted = false
            return true
        }
        func endRecord() -> Bool {
            guard endField() else { return false }
            if !(fields.count == 1 && fields[0].isEmpty) { records.append(Record(line: recordLine, fields: fields)) }
            fields.removeAll()
            return true
        }
        var i = input.startIndex
        while i < input.endIndex {
            let c = input[i]
            if quoted {
                if c == UInt8(ascii: "\"") {
                    if input.index(after: i) < input.endIndex, input[input.index(after: i)] == UInt8(ascii: "\"") {
                        field.append(c)
                        i = input.index(after: i)
                    } else {
                        quoted = false
                    }
                } else {
                    if c == 0x0A { line += 1 }
                    field.append(c)
                }
            } else {
                switch c {
                case UInt8(ascii: "\""):
                    guard field.isEmpty, !wasQuoted else { return nil }
                    quoted = true
                    wasQuoted = true
                case UInt8(ascii: ","):
                    guard endField() else { return nil }
                case 0x0D where input.index(after: i) < input.endIndex && input[input.index(after: i)] == 0x0A:
                    break
                case 0x0A:
                    guard endRecord() else { return nil }
                    line += 1
                    recordLine = line
                default:
                    guard !wasQuoted else { return nil }
                    field.append(c)
                }
            }
            i = input.index(after: i)
        }
        guard !quoted, endRecord() else { return nil }
        return records
    }
}
