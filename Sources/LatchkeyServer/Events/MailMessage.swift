import Foundation

/// An RFC 5322 message with one plain-text part (UTF-8, quoted-printable), so a code is readable by
/// a person and by a test. Header values are single lines by construction (addresses come from
/// `EmailAddress`, subjects are ours).
struct MailMessage: Sendable {
    /// SPEC "Assurance": every mail names its event in `X-Latchkey-Event`, so a mail filter (and a
    /// test) can tell a code from a notice without reading the text.
    enum Event: String, Sendable {
        case emailVerify = "email.verify"
        case emailSignIn = "email.sign-in"
        case recoveryCode = "recovery.code"
        case recoveryStarted = "recovery.started"
        case passkeyAdded = "passkey.added"
        case passkeyRevoked = "passkey.revoked"
        case emailChanged = "email.changed"
        /// SPEC "Quorum approvals": the subject's notice with the veto link, and a break-glass approval.
        case approvalRequested = "approval.requested"
        case approvalBreakGlass = "approval.break_glass"
    }

    let event: Event
    let from: String
    let to: String
    let subject: String
    let text: String
    let messageId: String
    let date: Date
    /// The catalog the text was written from (`Content-Language`).
    var language = "en"

    var bytes: [UInt8] {
        var lines = [
            "From: Latchkey <\(from)>", "To: <\(to)>", "Subject: \(Self.encodedWord(subject))", "Date: \(Self.rfc5322Date(date))",
            "Message-ID: <\(messageId)@\(from.split(separator: "@").last.map(String.init) ?? "latchkey")>", "MIME-Version: 1.0",
            "Content-Type: text/plain; charset=utf-8", "Content-Transfer-Encoding: quoted-printable", "Content-Language: \(language)",
            "Auto-Submitted: auto-generated",
            "X-Latchkey-Event: \(event.rawValue)", "",
        ]
        lines.append(Self.quotedPrintable(text))
        return Array(lines.joined(separator: "\r\n").utf8) + Array("\r\n".utf8)
    }

    /// RFC 2047 for a subject that is not plain ASCII.
    static func encodedWord(_ s: String) -> String {
        if s.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return s }
        return "=?utf-8?B?" + Data(s.utf8).base64EncodedString() + "?="
    }

    /// RFC 2045 §6.7: CRLF line breaks, soft breaks under 76 characters.
    static func quotedPrintable(_ text: String) -> String {
        let hex = Array("0123456789ABCDEF")
        var out: [String] = []
        for line in text.replacingOccurrences(of: "\r\n", with: "\n").split(separator: "\n", omittingEmptySubsequences: false) {
            var current = ""
            let bytes = Array(line.utf8)
            for (i, b) in bytes.enumerated() {
                let last = i == bytes.count - 1
                var piece: String
                if (b >= 33 && b <= 126 && b != 61) || (b == 32 && !last) {
                    piece = String(UnicodeScalar(b))
                } else {
                    piece = "=" + String(hex[Int(b >> 4)]) + String(hex[Int(b & 15)])
                }
                if current.count + piece.count > 75 { out.append(current + "="); current = "" }
                current += piece
            }
            out.append(current)
        }
        return out.joined(separator: "\r\n")
    }

    static func rfc5322Date(_ date: Date) -> String {
        var t = time_t(date.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&t, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func pad(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(days[Int(parts.tm_wday)]), \(parts.tm_mday) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(pad(parts.tm_hour)):\(pad(parts.tm_min)):\(pad(parts.tm_sec)) +0000"
    }
}
