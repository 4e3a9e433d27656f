"""A `latchkey serve` of a browser test's own: started, waited for (/readyz), always stopped.

No Selenium here: the Chromium suites (through test_web, which re-exports these) and the Firefox
ones over Marionette both start their servers with it.
"""
import os
import subprocess
import time
import urllib.request


def wait_until_ready(server, port, label, log_name, seconds=60):
    """Waits for a `latchkey serve` child to answer /readyz on `port`; False (and a FAIL line
    naming its log) when it exits or does not answer within `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(f'http://127.0.0.1:{port}/readyz', timeout=2) as r:
                if r.status == 200:
                    return True
        except Exception:  # noqa: BLE001 - not up yet
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            print(f'FAIL {label}: the server did not start (data/browser/{log_name})')
            return False
        time.sleep(0.2)


def with_server(binary, env, port, label, log_name, body):
    """Runs `body()` against `binary serve` started with `env` (its log in data/browser/`log_name`)
    once it answers /readyz on `port`, and returns body's exit status (1 when the server does not
    start). The server is stopped whatever happens."""
    os.makedirs(os.path.join('data', 'browser'), exist_ok=True)
    with open(os.path.join('data', 'browser', log_name), 'w') as log:
        server = subprocess.Popen([binary, 'serve'], env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            if not wait_until_ready(server, port, label, log_name):
                return 1
            return body()
        finally:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
