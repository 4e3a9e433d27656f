"""Each test's requests from a loopback address of its own (127.0.0.0/8 is all loopback on Linux).

The server counts some limits per client address (SPEC "OpenID Provider" → "Limits": one address
stores at most 30 authorization requests a minute), and the https front passes the connection's
address on (X-Forwarded-For = nginx's $remote_addr). A real deployment's requests come from many
browsers; the suite's would all come from 127.0.0.1 and add up across tests. `use()` makes every
new connection to a loopback server (requests/urllib3, Authlib's and idpyoidc's sessions included)
start from the given address; connections kept alive from before keep theirs, so close a session's
pools (`session.close()`) when the address changes.
"""
import itertools
import secrets

import urllib3.util.connection as _connection

_create = _connection.create_connection
_current = {'address': None}
# A random start: another process of the suite (test_idpyoidc.py after test_oidc.py) gets others.
_numbers = itertools.count(secrets.randbelow(10_000_000))


def _from_source(address, *args, source_address=None, **kwargs):
    host = address[0]
    if source_address is None and _current['address'] and (host == 'localhost' or host.startswith('127.')):
        source_address = (_current['address'], 0)
    return _create(address, *args, source_address=source_address, **kwargs)


_connection.create_connection = _from_source


def use(address):
    _current['address'] = address


def fresh():
    """A loopback address not used before in this process (never 127.0.0.1); in use from now on."""
    n = next(_numbers)
    address = f'127.{1 + n // 62500 % 250}.{n // 250 % 250}.{2 + n % 250}'
    use(address)
    return address
