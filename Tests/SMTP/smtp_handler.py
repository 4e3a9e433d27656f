"""A real SMTP server for the test suites: aiosmtpd (Debian's python3-aiosmtpd) with this handler,
started by scripts/smtp.sh as `python3 -m aiosmtpd -n -l 127.0.0.1:PORT -c smtp_handler.FileHandler DIR`.

Every accepted message is stored as DIR/<recipient>/<time>-<id>.eml (the bytes as received), so a
test finds the mail for its own address. A file DIR/refuse/<recipient> holding a number N makes the
server answer the next N deliveries to that recipient with 451 (a temporary failure): a mail server
that refuses the first attempts, for the retry tests. Each stored file starts with X-Envelope-From
and X-Test-TLS (yes when the message came over STARTTLS or SMTPS).
"""
import os
import time
import uuid


class FileHandler:
    def __init__(self, directory, implicit_tls=False):
        self.directory = directory
        self.implicit_tls = implicit_tls  # the SMTPS listener: every session is TLS
        os.makedirs(os.path.join(directory, "refuse"), exist_ok=True)

    @classmethod
    def from_cli(cls, parser, *args):
        if len(args) not in (1, 2) or (len(args) == 2 and args[1] != "smtps"):
            parser.error("smtp_handler.FileHandler takes the mail folder, and `smtps` on the SMTPS listener")
        return cls(args[0], implicit_tls=len(args) == 2)

    def _refuse(self, recipient):
        path = os.path.join(self.directory, "refuse", recipient)
        try:
            with open(path) as f:
                n = int(f.read().strip() or "0")
        except (OSError, ValueError):
            return False
        if n <= 0:
            return False
        with open(path, "w") as f:
            f.write(str(n - 1))
        return True

    async def handle_DATA(self, server, session, envelope):
        recipients = [r.lower() for r in envelope.rcpt_tos]
        if any(self._refuse(r) for r in recipients):
            return "451 4.3.0 Try again later (test server refusing this attempt)"
        content = envelope.original_content or envelope.content
        if isinstance(content, str):
            content = content.encode("utf-8")
        for r in recipients:
            folder = os.path.join(self.directory, r)
            os.makedirs(folder, exist_ok=True)
            name = "%d-%s.eml" % (time.time_ns(), uuid.uuid4().hex)
            tmp = os.path.join(folder, "." + name + ".tmp")
            with open(tmp, "wb") as f:
                tls = b"yes" if self.implicit_tls or getattr(session, "ssl", None) else b"no"
                f.write(b"X-Envelope-From: " + envelope.mail_from.encode() + b"\r\nX-Test-TLS: " + tls + b"\r\n" + content)
            os.rename(tmp, os.path.join(folder, name))
        return "250 2.0.0 Stored"
