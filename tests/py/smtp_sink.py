"""A real SMTP server for the notification tests (aiosmtpd): every message it accepts is
written to DIR as N.eml (the raw message) and N.json (envelope: mail_from, rcpt_tos).

    python3 smtp_sink.py PORT DIR [USER:PASSWORD]

With USER:PASSWORD, AUTH (PLAIN/LOGIN, allowed without TLS on loopback) is required and wrong
credentials are refused with 535. Recipients on the domain `refused.test` are refused with
550 (a permanent error). Prints "ready" once listening; runs until killed.
"""
import json
import os
import sys
import time

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


class Sink:
    def __init__(self, directory):
        self.directory = directory
        self.n = 0

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address.lower().endswith("@refused.test"):
            return "550 5.1.1 no such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        self.n += 1
        base = os.path.join(self.directory, f"{self.n:05d}")
        with open(base + ".eml.tmp", "wb") as f:
            f.write(envelope.original_content or envelope.content)
        with open(base + ".json", "w") as f:
            json.dump({"mail_from": envelope.mail_from, "rcpt_tos": envelope.rcpt_tos}, f)
        os.rename(base + ".eml.tmp", base + ".eml")
        return "250 Message accepted for delivery"


def main():
    port, directory = int(sys.argv[1]), sys.argv[2]
    creds = sys.argv[3].split(":", 1) if len(sys.argv) > 3 else None
    kwargs = {}
    if creds:
        def authenticator(server, session, envelope, mechanism, auth_data):
            ok = (
                isinstance(auth_data, LoginPassword)
                and auth_data.login.decode() == creds[0]
                and auth_data.password.decode() == creds[1]
            )
            # handled=False: aiosmtpd answers a failure with 535 5.7.8 itself.
            return AuthResult(success=ok, handled=False)

        kwargs = dict(authenticator=authenticator, auth_required=True, auth_require_tls=False)
    controller = Controller(Sink(directory), hostname="127.0.0.1", port=port, **kwargs)
    controller.start()
    print("ready", flush=True)
    try:
        while True:
            time.sleep(3600)
    finally:
        controller.stop()


if __name__ == "__main__":
    main()
