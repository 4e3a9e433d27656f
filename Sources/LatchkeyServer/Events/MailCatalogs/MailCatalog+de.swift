extension MailCatalog {
    /// Deutsch.
    static let de: [Key: String] = [
        .codeFooter: "Er läuft in {minutes} ab und funktioniert einmal. Wenn Sie ihn nicht angefordert haben, ignorieren Sie diese Nachricht.",
        .signInSubject: "Ihr Latchkey-Anmeldecode: {code}",
        .signInIntro: "Ihr Anmeldecode lautet: {code}",
        .recoveryCodeSubject: "Ihr Latchkey-Wiederherstellungscode: {code}",
        .recoveryCodeIntro: "Jemand (hoffentlich Sie) möchte Ihr Konto wiederherstellen. Ihr Wiederherstellungscode lautet: {code}",
        .verifySubject: "Ihr Latchkey-Bestätigungscode: {code}",
        .verifyBody: """
            Ihr Bestätigungscode lautet: {code}

            Geben Sie ihn in Latchkey ein, um diese Adresse zu bestätigen. Er läuft in {minutes} ab und funktioniert einmal.
            Wenn Sie ihn nicht angefordert haben, ignorieren Sie diese Nachricht.
            """,
        .changedSubject: "Die E-Mail-Adresse Ihres Latchkey-Kontos wurde geändert",
        .changedBody: """
            Die bestätigte E-Mail-Adresse Ihres Latchkey-Kontos wurde soeben durch eine andere ersetzt.
            Wiederherstellungscodes und Hinweise zur Wiederherstellung gehen jetzt an die neue Adresse.

            Wenn Sie das nicht waren, melden Sie sich mit Ihrem Passkey an, setzen Sie Ihre Adresse erneut
            und prüfen Sie Ihre Sitzungen und laufenden Wiederherstellungen.
            """,
        .approvalRequestedSubject: "Eine Aktion für Ihr Latchkey-Konto wartet auf Freigabe",
        .approvalRequestedBody: """
            Jemand möchte {action} (Richtlinie {policy}). Dafür sind {needed} Freigaben nötig; frühestens ab {date} nutzbar.
            Wenn Sie das nicht wollen, stoppen Sie es jetzt – ohne Anmeldung:
            {link}
            """,
        .approvalBreakGlassSubject: "Für Ihr Latchkey-Konto wurde eine Notfall-Freigabe genutzt",
        .approvalBreakGlassBody: """
            Soeben wurde eine Notfall-Freigabe („Break Glass“) für {action} unter der Richtlinie {policy} erteilt.
            Sie gilt sofort und ist mit dem signierten Beleg der freigebenden Person festgehalten.
            Wenn das unerwartet ist, wenden Sie sich an Ihre Administration.
            """,
        .addedSubject: "Ihrem Latchkey-Konto wurde ein Passkey hinzugefügt",
        .addedBody: "Ihrem Latchkey-Konto wurde ein Passkey ({name}) hinzugefügt.",
        .addedHeld: """
            Er kann sich anmelden, gibt aber bis {date} nichts frei (Zahlungen, neue Geräteschlüssel, Kontoänderungen).
            Wenn Sie das nicht waren, entfernen Sie ihn jetzt – ohne Anmeldung:
            {link}
            """,
        .addedNotHeld: "Wenn Sie das nicht waren, melden Sie sich mit einem Ihrer anderen Passkeys an, entfernen Sie ihn und prüfen Sie Ihre Sitzungen.",
        .revokedSubject: "Aus Ihrem Latchkey-Konto wurde ein Passkey entfernt",
        .revokedBody: """
            Aus Ihrem Latchkey-Konto wurde ein Passkey entfernt.
            Wenn Sie das nicht waren, melden Sie sich mit einem Ihrer anderen Passkeys an und prüfen Sie Ihre Passkeys und Sitzungen.
            """,
        .revokedByAdminBody: """
            Aus Ihrem Latchkey-Konto wurde von einem Administrator ein Passkey entfernt.
            Wenn Sie das nicht waren, melden Sie sich mit einem Ihrer anderen Passkeys an und prüfen Sie Ihre Passkeys und Sitzungen.
            """,
        .startedSubject: "Die Wiederherstellung Ihres Latchkey-Kontos wurde gestartet",
        .startedBody: """
            Eine Wiederherstellung Ihres Latchkey-Kontos wurde gestartet ({how}).
            Sie kann {when} einen neuen Passkey registrieren; dabei werden alle anderen Sitzungen abgemeldet und Ihre Geräteschlüssel entfernt.

            Wenn Sie das nicht waren, brechen Sie sie vorher ab – ohne Anmeldung:
            {link}

            (Oder melden Sie sich an und brechen Sie die Wiederherstellung {id} über das Banner ab.)
            """,
        .startedByEmail: "mit einem per E-Mail gesendeten Code",
        .startedByCode: "mit einem Wiederherstellungscode",
        .startedNow: "ab sofort",
        .startedLater: "in {duration} ({date})",
        .hoursOne: "{n} Stunde", .hoursFew: "{n} Stunden", .hoursOther: "{n} Stunden",
        .minutesOne: "{n} Minute", .minutesFew: "{n} Minuten", .minutesOther: "{n} Minuten",
        .secondsOne: "{n} Sekunde", .secondsFew: "{n} Sekunden", .secondsOther: "{n} Sekunden",
        .dateTime: "{day}. {month} {year}, {time} UTC",
    ]

    /// Monatsnamen, für `dateTime`.
    static let deMonths: [String] = ["Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September", "Oktober", "November", "Dezember"]
}
