extension MailCatalog {
    /// Polski.
    static let pl: [Key: String] = [
        .codeFooter: "Kod wygasa za {minutes} i działa jeden raz. Jeśli nie prosiłeś o niego, zignoruj tę wiadomość.",
        .signInSubject: "Twój kod logowania do Latchkey: {code}",
        .signInIntro: "Twój kod logowania to: {code}",
        .recoveryCodeSubject: "Twój kod odzyskiwania Latchkey: {code}",
        .recoveryCodeIntro: "Ktoś (miejmy nadzieję, że Ty) chce odzyskać Twoje konto. Twój kod odzyskiwania to: {code}",
        .verifySubject: "Twój kod weryfikacyjny Latchkey: {code}",
        .verifyBody: """
            Twój kod weryfikacyjny to: {code}

            Wpisz go w Latchkey, aby potwierdzić ten adres. Wygasa za {minutes} i działa jeden raz.
            Jeśli nie prosiłeś o niego, zignoruj tę wiadomość.
            """,
        .changedSubject: "Adres e-mail Twojego konta Latchkey został zmieniony",
        .changedBody: """
            Zweryfikowany adres e-mail Twojego konta Latchkey został właśnie zastąpiony innym.
            Kody odzyskiwania i powiadomienia o odzyskiwaniu trafiają teraz na nowy adres.

            Jeśli to nie Ty, zaloguj się kluczem dostępu, ustaw adres ponownie i sprawdź
            swoje sesje oraz trwające odzyskiwania.
            """,
        .approvalRequestedSubject: "Działanie na Twoim koncie Latchkey czeka na zatwierdzenie",
        .approvalRequestedBody: """
            Ktoś poprosił o: {action} (zasada {policy}). Potrzeba {needed} zatwierdzeń; najwcześniej od {date}.
            Jeśli tego nie chcesz, zatrzymaj to teraz — bez logowania:
            {link}
            """,
        .approvalBreakGlassSubject: "Na Twoim koncie Latchkey użyto zatwierdzenia awaryjnego",
        .approvalBreakGlassBody: """
            Właśnie udzielono awaryjnego zatwierdzenia („break glass”) dla: {action} według zasady {policy}.
            Obowiązuje od razu i jest zapisane z podpisanym potwierdzeniem zatwierdzającego.
            Jeśli się tego nie spodziewasz, skontaktuj się z administratorem.
            """,
        .addedSubject: "Do Twojego konta Latchkey dodano klucz dostępu",
        .addedBody: "Do Twojego konta Latchkey dodano klucz dostępu ({name}).",
        .addedHeld: """
            Pozwala się zalogować, ale do {date} niczego nie zatwierdza (płatności, nowe klucze urządzeń, zmiany konta).
            Jeśli to nie Ty, usuń go teraz — bez logowania:
            {link}
            """,
        .addedNotHeld: "Jeśli to nie Ty, zaloguj się innym kluczem dostępu, usuń go i sprawdź swoje sesje.",
        .revokedSubject: "Z Twojego konta Latchkey usunięto klucz dostępu",
        .revokedBody: """
            Z Twojego konta Latchkey usunięto klucz dostępu.
            Jeśli to nie Ty, zaloguj się innym kluczem dostępu i sprawdź swoje klucze i sesje.
            """,
        .revokedByAdminBody: """
            Administrator usunął klucz dostępu z Twojego konta Latchkey.
            Jeśli to nie Ty, zaloguj się innym kluczem dostępu i sprawdź swoje klucze i sesje.
            """,
        .startedSubject: "Rozpoczęto odzyskiwanie Twojego konta Latchkey",
        .startedBody: """
            Rozpoczęto odzyskiwanie Twojego konta Latchkey ({how}).
            Nowy klucz dostępu będzie można zarejestrować {when}; wtedy wszystkie inne sesje zostaną wylogowane, a klucze urządzeń usunięte.

            Jeśli to nie Ty, anuluj je wcześniej — bez logowania:
            {link}

            (Albo zaloguj się i anuluj odzyskiwanie {id} z poziomu baneru.)
            """,
        .startedByEmail: "kodem wysłanym e-mailem",
        .startedByCode: "kodem odzyskiwania",
        .startedNow: "od razu",
        .startedLater: "za {duration} ({date})",
        // After "za" (accusative): 1 godzinę, 2–4 godziny (22–24 …), 5–21 godzin.
        .hoursOne: "{n} godzinę", .hoursFew: "{n} godziny", .hoursOther: "{n} godzin",
        .minutesOne: "{n} minutę", .minutesFew: "{n} minuty", .minutesOther: "{n} minut",
        .secondsOne: "{n} sekundę", .secondsFew: "{n} sekundy", .secondsOther: "{n} sekund",
        .dateTime: "{day} {month} {year}, {time} UTC",
    ]

    /// Month names in the genitive ("7 grudnia 2026"), for `dateTime`.
    static let plMonths: [String] = ["stycznia", "lutego", "marca", "kwietnia", "maja", "czerwca", "lipca", "sierpnia", "września", "października", "listopada", "grudnia"]
}
