extension MailCatalog {
    /// English (the fallback for every other catalog).
    static let en: [Key: String] = [
        .codeFooter: "It expires in {minutes} and works once. If you did not ask for it, ignore this message.",
        .signInSubject: "Your Latchkey sign-in code: {code}",
        .signInIntro: "Your sign-in code is: {code}",
        .recoveryCodeSubject: "Your Latchkey recovery code: {code}",
        .recoveryCodeIntro: "Someone (hopefully you) asked to recover your account. Your recovery code is: {code}",
        .verifySubject: "Your Latchkey verification code: {code}",
        .verifyBody: """
            Your verification code is: {code}

            Enter it in Latchkey to confirm this address. It expires in {minutes} and works once.
            If you did not ask for it, ignore this message.
            """,
        .changedSubject: "The email address of your Latchkey account was changed",
        .changedBody: """
            The verified email address of your Latchkey account was just replaced by another one.
            Mailed recovery codes and recovery notices now go to the new address.

            If this was not you, sign in with your passkey, set your address again and check your
            sessions and pending recoveries.
            """,
        .approvalRequestedSubject: "An action on your Latchkey account is waiting for approval",
        .approvalRequestedBody: """
            Someone asked to {action} (policy {policy}). It needs {needed} approvals and can be used from {date} at the earliest.
            If you do not want this, stop it now — no sign-in needed:
            {link}
            """,
        .approvalBreakGlassSubject: "An emergency approval was used on your Latchkey account",
        .approvalBreakGlassBody: """
            An emergency ("break glass") approval of {action} was just given under policy {policy}.
            It took effect at once; it is recorded with the approver's signed receipt.
            If this was not expected, contact your administrator.
            """,
        .addedSubject: "A passkey was added to your Latchkey account",
        .addedBody: "A passkey ({name}) was added to your Latchkey account.",
        .addedHeld: """
            It can sign in, but it approves nothing (payments, new device keys, account changes) until {date}.
            If this was not you, remove it now — no sign-in needed:
            {link}
            """,
        .addedNotHeld: "If this was not you, sign in with one of your other passkeys, remove it and check your sessions.",
        .revokedSubject: "A passkey was removed from your Latchkey account",
        .revokedBody: """
            A passkey was removed from your Latchkey account.
            If this was not you, sign in with one of your other passkeys and check your passkeys and sessions.
            """,
        .revokedByAdminBody: """
            A passkey was removed from your Latchkey account by an administrator.
            If this was not you, sign in with one of your other passkeys and check your passkeys and sessions.
            """,
        .startedSubject: "Recovery of your Latchkey account started",
        .startedBody: """
            A recovery of your Latchkey account was started ({how}).
            It can register a new passkey {when}; that will sign out every other session and remove your device keys.

            If this was not you, cancel it before then — no sign-in needed:
            {link}

            (Or sign in and cancel recovery {id} from the banner.)
            """,
        .startedByEmail: "by an emailed code",
        .startedByCode: "with a recovery code",
        .startedNow: "now",
        .startedLater: "in {duration} ({date})",
        .hoursOne: "{n} hour", .hoursFew: "{n} hours", .hoursOther: "{n} hours",
        .minutesOne: "{n} minute", .minutesFew: "{n} minutes", .minutesOther: "{n} minutes",
        .secondsOne: "{n} second", .secondsFew: "{n} seconds", .secondsOther: "{n} seconds",
        .dateTime: "{day} {month} {year}, {time} UTC",
    ]

    /// Month names, for `dateTime`.
    static let enMonths: [String] = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"]
}
