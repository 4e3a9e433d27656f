#!/usr/bin/env python3
"""A CIBA client written from OpenID Connect Client-Initiated Backchannel Authentication Core 1.0
(poll and ping modes), with `requests`, against a real `latchkey serve`. Run by Tests/OIDC/run.sh.

The client side is the spec's: discovery (§4), the authentication request with client_secret_basic
(§7.1), its acknowledgement (§7.3), the token request with the CIBA grant (§10.1) and its errors
(§11: authorization_pending, slow_down, access_denied, expired_token), and the ping callback (§10.2)
to a notification endpoint on loopback. The person's side is the phone: an account with a passkey
(softauthn.py) enrols a device key (a P-256 key from `cryptography`), and approves the request with
that key's step-up, exactly as the native app does through Latchkey's /v1 API.
Prints one line per test and closes with 'N passed, N failed'; exit 1 on any failure.
"""
import base64
import email
import email.policy
import glob
import http.server
import json
import os
import queue
import secrets
import subprocess
import sys
import threading
import time
import traceback
import urllib.parse
import warnings

warnings.filterwarnings('ignore', message='authlib.jose module is deprecated')
import requests
from authlib.jose import JsonWebKey, jwt
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from softauthn import SoftPasskey, b64u

BASE = os.environ['LATCHKEY_URL'].rstrip('/')
BIN = os.environ['LATCHKEY_BIN']
MAIL_DIR = os.environ.get('LATCHKEY_MAIL_DIR', '')
RP_ID = urllib.parse.urlparse(BASE).hostname
CIBA_GRANT = 'urn:openid:params:grant-type:ciba'
RESULTS = []
S = requests.Session()


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def b64d(s):
    return base64.urlsafe_b64decode(s + '=' * (-len(s) % 4))


def api(method, path, body=None, token=None, headers=None):
    h = dict(headers or {})
    if token:
        h['Authorization'] = 'Bearer ' + token
    r = S.request(method, BASE + path, json=body, headers=h, allow_redirects=False, timeout=20)
    try:
        data = r.json()
    except ValueError:
        data = None
    return r.status_code, data


def add_client(name, *args):
    out = subprocess.run([BIN, 'clients', 'add', name, '--redirect-uri', 'https://bank.example/cb', *args],
                         capture_output=True, text=True, check=True).stdout
    fields = dict(line.split(': ', 1) for line in out.strip().splitlines())
    return fields['client_id'], fields['client_secret']


class Phone:
    """An account with a passkey, and the device key its app enrolled (a P-256 key)."""

    def __init__(self):
        self.username = 'ciba-' + secrets.token_hex(4)
        self.pk = SoftPasskey(RP_ID, BASE)
        st, options = api('POST', '/v1/passkeys/registration/options', {'username': self.username, 'displayName': 'CIBA'})
        check(st == 200, f'registration options: {st} {options}')
        st, done = api('POST', '/v1/passkeys/registration/verify', self.pk.create(options))
        check(st == 201, f'registration verify: {st} {done}')
        self.token, self.user_id = done['tokens']['access_token'], done['user']['id']
        self.key = ec.generate_private_key(ec.SECP256R1())
        device_id = 'phone-' + secrets.token_hex(4)
        # Enrolling a device key is gated by a passkey step-up for exactly this device.
        approval = self.passkey_step_up({'type': 'latchkey.device-key.enrol', 'deviceId': device_id})
        st, c = api('POST', '/v1/device-keys/challenges', token=self.token)
        check(st == 201, f'enrolment challenge: {st} {c}')
        spki = self.key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        body = {'deviceId': device_id, 'publicKey': b64u(spki), 'platform': 'android', 'name': 'Test phone',
                'challengeId': c['challengeId'], 'signature': self.sign(c['challenge'])}
        st, enrolled = api('POST', '/v1/device-keys', body, token=self.token, headers={'Latchkey-Step-Up': approval})
        check(st == 201, f'device key enrolment: {st} {enrolled}')
        self.key_id = enrolled['id']

    def sign(self, challenge, key=None):
        return b64u((key or self.key).sign(b64d(challenge), ec.ECDSA(hashes.SHA256())))

    def passkey_step_up(self, action, token=None):
        """A user-verified passkey step-up made in the session of `token` (the passkey session's by default)."""
        token = token or self.token
        st, ch = api('POST', '/v1/step-up/challenges', {'method': 'passkey', 'action': action}, token=token)
        check(st == 201, f'passkey step-up challenge: {st} {ch}')
        st, v = api('POST', '/v1/step-up/verify', {'challengeId': ch['challengeId'], 'credential': self.pk.get(ch['publicKey'])}, token=token)
        check(st == 200, f'passkey step-up verify: {st} {v}')
        return v['access_token']

    def enrol_key(self, token):
        """Another device key, enrolled in the session of `token` (its device-key session)."""
        key = ec.generate_private_key(ec.SECP256R1())
        device_id = 'tablet-' + secrets.token_hex(4)
        approval = self.passkey_step_up({'type': 'latchkey.device-key.enrol', 'deviceId': device_id}, token=token)
        st, c = api('POST', '/v1/device-keys/challenges', token=token)
        check(st == 201, f'enrolment challenge: {st} {c}')
        spki = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        body = {'deviceId': device_id, 'publicKey': b64u(spki), 'platform': 'android', 'name': 'Tablet',
                'challengeId': c['challengeId'], 'signature': self.sign(c['challenge'], key)}
        st, enrolled = api('POST', '/v1/device-keys', body, token=token, headers={'Latchkey-Step-Up': approval})
        check(st == 201, f'device key enrolment: {st} {enrolled}')
        return key, enrolled['id']

    def email_session(self):
        """A verified address (its code read from the .eml development mode writes), then a session
        signed in with a mailed code: a session no passkey began."""
        address = f'{self.username}@example.com'
        if not getattr(self, 'mails', 0):
            approval = self.passkey_step_up({'type': 'latchkey.email.change', 'email': address})
            st, started = api('PUT', '/v1/account/email', {'email': address}, token=self.token, headers={'Latchkey-Step-Up': approval})
            check(st == 202, f'address change: {st} {started}')
            self.mails = 1
            st, done = api('POST', '/v1/account/email/verify', {'challengeId': started['challengeId'], 'code': mailed_code(address, 1)},
                           token=self.token)
            check(st == 200, f'address verify: {st} {done}')
        st, started = api('POST', '/v1/email/challenges', {'email': address})
        check(st == 202, f'email sign-in: {st} {started}')
        self.mails += 1
        st, signed_in = api('POST', '/v1/email/verify', {'challengeId': started['challengeId'], 'code': mailed_code(address, self.mails)})
        check(st == 200, f'email sign-in verify: {st} {signed_in}')
        return signed_in['tokens']['access_token']

    def pending(self):
        st, body = api('GET', '/v1/ciba/requests', token=self.token)
        check(st == 200, f'pending requests: {st} {body}')
        return body['requests']

    def approve(self, auth_req_id, token=None, key=None, key_id=None, expect=204):
        """What the app does: show the request, sign its action with the device key, approve — in
        the session of `token` with the key `key_id` (the passkey session and its key by default)."""
        token, key, key_id = token or self.token, key or self.key, key_id or self.key_id
        shown = next((r for r in self.pending() if r['authReqId'] == auth_req_id), None)
        check(shown is not None, f'{auth_req_id} is not among the pending requests')
        action = {'type': 'latchkey.ciba.approve', 'authReqId': auth_req_id, 'clientId': shown['client']['id'],
                  'bindingMessage': shown['bindingMessage'], 'authorizationDetails': shown['authorizationDetails']}
        st, ch = api('POST', '/v1/step-up/challenges', {'keyId': key_id, 'action': action}, token=token)
        check(st == 201, f'device-key step-up challenge: {st} {ch}')
        st, v = api('POST', '/v1/step-up/verify', {'challengeId': ch['challengeId'], 'signature': self.sign(ch['challenge'], key)}, token=token)
        check(st == 200, f'device-key step-up verify: {st} {v}')
        r = S.post(f'{BASE}/v1/ciba/requests/{auth_req_id}/approve', headers={'Authorization': 'Bearer ' + token,
                                                                            'Latchkey-Step-Up': v['access_token']}, timeout=20)
        check(r.status_code == expect, f'approve: {r.status_code} {r.text} (expected {expect})')
        return v['receiptId'] if expect == 204 else r.json()

    def deny(self, auth_req_id):
        r = S.post(f'{BASE}/v1/ciba/requests/{auth_req_id}/deny', headers={'Authorization': 'Bearer ' + self.token}, timeout=20)
        check(r.status_code == 204, f'deny: {r.status_code} {r.text}')


class CIBAClient:
    """The Client of CIBA Core: a confidential client that authenticates with client_secret_basic."""

    def __init__(self, client_id, secret, discovery):
        self.client_id, self.secret, self.d = client_id, secret, discovery

    def post(self, url, form):
        r = requests.post(url, data=form, auth=(self.client_id, self.secret), timeout=20)
        return r.status_code, r.json()

    def authenticate(self, **form):
        """§7.1 → §7.3 (or §13's error)."""
        return self.post(self.d['backchannel_authentication_endpoint'], form)

    def token(self, auth_req_id):
        """§10.1."""
        return self.post(self.d['token_endpoint'], {'grant_type': CIBA_GRANT, 'auth_req_id': auth_req_id})

    def poll_until_done(self, auth_req_id, interval, approve_after_first=None, limit=8):
        """§7.3/§11: wait `interval` between polls; slow_down adds 5 s (RFC 8628 §3.5)."""
        for n in range(limit):
            st, body = self.token(auth_req_id)
            if st == 200:
                return body
            check(st == 400 and body['error'] in ('authorization_pending', 'slow_down'), f'poll: {st} {body}')
            if body['error'] == 'slow_down':
                interval += 5
            if n == 0 and approve_after_first:
                approve_after_first()
            time.sleep(interval)
        raise AssertionError('no tokens after polling')


def mailed_code(address, nth, timeout=30):
    """The code of the `nth` message to `address` among the .eml files development mode writes."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = []
        for path in glob.glob(os.path.join(MAIL_DIR, '*.eml')):
            with open(path, 'rb') as f:
                message = email.message_from_binary_file(f, policy=email.policy.default)
            if address in str(message['To']):
                found.append((os.path.getmtime(path), message.get_body(('plain',)).get_content()))
        if len(found) >= nth:
            body = sorted(found)[nth - 1][1]
            return body.split('code is: ', 1)[1].split()[0].strip()
        time.sleep(0.2)
    raise AssertionError(f'no message {nth} to {address} in {MAIL_DIR}')


def discovery():
    r = requests.get(BASE + '/.well-known/openid-configuration', timeout=20)
    check(r.status_code == 200, f'discovery: {r.status_code}')
    return r.json()


def verify_id_token(d, id_token, client_id):
    keys = JsonWebKey.import_key_set(requests.get(d['jwks_uri'], timeout=20).json())
    claims = jwt.decode(id_token, keys)
    claims.validate()
    check(claims['iss'] == d['issuer'] and claims['aud'] == client_id, f'id_token claims {dict(claims)}')
    return claims


def payload(token):
    return json.loads(b64d(token.split('.')[1]))


# ---- tests -------------------------------------------------------------------------------------

def test_discovery():
    d = discovery()
    check(d['backchannel_authentication_endpoint'] == BASE + '/oauth2/bc-authorize', d.get('backchannel_authentication_endpoint'))
    check(set(d['backchannel_token_delivery_modes_supported']) == {'poll', 'ping'}, d['backchannel_token_delivery_modes_supported'])
    check(d['backchannel_user_code_parameter_supported'] is False, 'user_code')
    check(CIBA_GRANT in d['grant_types_supported'], d['grant_types_supported'])


def test_poll_mode():
    d = discovery()
    cid, secret = add_client('Bank (poll)', '--grant-type', 'ciba', '--ciba-mode', 'poll', '--ciba-approver', 'device-key',
                             '--authorization-details-type', 'payment_initiation')
    client, phone = CIBAClient(cid, secret, d), Phone()
    details = [{'type': 'payment_initiation', 'instructedAmount': {'currency': 'EUR', 'amount': '120.00'}, 'creditorName': 'Shop'}]
    st, ack = client.authenticate(scope='openid offline_access', login_hint=phone.username, binding_message='W-4711',
                                  authorization_details=json.dumps(details))
    check(st == 200 and {'auth_req_id', 'expires_in', 'interval'} <= set(ack), f'ack: {st} {ack}')
    rid = ack['auth_req_id']
    # Polling faster than the interval is slow_down (§11); the first poll is pending.
    st, first = client.token(rid)
    check(st == 400 and first['error'] == 'authorization_pending', f'first poll: {st} {first}')
    st, fast = client.token(rid)
    check(st == 400 and fast['error'] == 'slow_down', f'a poll too soon: {st} {fast}')
    receipt = {}
    tokens = client.poll_until_done(rid, ack['interval'] + 5, approve_after_first=lambda: receipt.setdefault('id', phone.approve(rid)))
    check(tokens['token_type'] in ('Bearer', 'DPoP') and 'refresh_token' in tokens, f'tokens: {tokens}')
    claims = verify_id_token(d, tokens['id_token'], cid)
    check(claims['sub'] == phone.user_id and claims['acr'] == 'urn:latchkey:acr:device-key', f'id_token: {dict(claims)}')
    access = payload(tokens['access_token'])
    check(access['authorization_details'] == details and access['receipt_id'] == receipt['id'], f'access token: {access}')
    # Tokens once (§11: the auth_req_id is used up).
    st, again = client.token(rid)
    check(st == 400 and again['error'] == 'invalid_grant', f'second token request: {st} {again}')


def test_denied_and_errors():
    d = discovery()
    cid, secret = add_client('Bank (errors)', '--grant-type', 'ciba', '--ciba-approver', 'device-key')
    client, phone = CIBAClient(cid, secret, d), Phone()
    st, ack = client.authenticate(scope='openid', login_hint=phone.username)
    check(st == 200, f'ack: {st} {ack}')
    phone.deny(ack['auth_req_id'])
    st, body = client.token(ack['auth_req_id'])
    check(st == 400 and body['error'] == 'access_denied', f'denied: {st} {body}')
    for form, error in [({'scope': 'openid', 'login_hint': 'nobody-' + secrets.token_hex(4)}, 'unknown_user_id'),
                        ({'scope': 'openid', 'login_hint': phone.username, 'binding_message': 'x' * 65}, 'invalid_binding_message'),
                        ({'scope': 'openid', 'login_hint': phone.username, 'id_token_hint': 'a.b.c'}, 'invalid_request'),
                        ({'scope': 'email', 'login_hint': phone.username}, 'invalid_scope'),
                        ({'scope': 'openid', 'login_hint': phone.username, 'requested_expiry': '5'}, 'invalid_request')]:
        st, body = client.authenticate(**form)
        check(st == 400 and body['error'] == error, f'{form}: {st} {body} (expected {error})')
    st, body = client.token('lkb_' + b64u(secrets.token_bytes(32)))
    check(st == 400 and body['error'] == 'invalid_grant', f'unknown auth_req_id: {st} {body}')
    plain, plain_secret = add_client('Not CIBA')
    st, body = CIBAClient(plain, plain_secret, d).authenticate(scope='openid', login_hint=phone.username)
    check(st == 400 and body['error'] == 'unauthorized_client', f'a client without the grant: {st} {body}')


def test_ping_mode():
    d = discovery()
    pings = queue.Queue()

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get('Content-Length', '0')))
            pings.put((self.headers.get('Authorization'), self.headers.get('Content-Type'), body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *a):
            pass
    server = http.server.HTTPServer(('127.0.0.1', 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = f'http://127.0.0.1:{server.server_port}/ciba-callback'
        cid, secret = add_client('Bank (ping)', '--grant-type', 'ciba', '--ciba-mode', 'ping', '--ciba-notification-endpoint', endpoint,
                                 '--ciba-approver', 'device-key')
        client, phone = CIBAClient(cid, secret, d), Phone()
        st, body = client.authenticate(scope='openid', login_hint=phone.username)
        check(st == 400 and body['error'] == 'invalid_request', f'ping without client_notification_token: {st} {body}')
        bearer = secrets.token_urlsafe(24)
        st, ack = client.authenticate(scope='openid', login_hint=phone.username, client_notification_token=bearer, binding_message='TV-42')
        check(st == 200, f'ack: {st} {ack}')
        phone.approve(ack['auth_req_id'])
        # §10.2: the OP POSTs {"auth_req_id"} with the client_notification_token as a Bearer.
        authorization, content_type, raw = pings.get(timeout=30)
        check(authorization == 'Bearer ' + bearer, f'ping Authorization: {authorization}')
        check(content_type.startswith('application/json') and json.loads(raw) == {'auth_req_id': ack['auth_req_id']}, f'ping body: {raw}')
        st, tokens = client.token(ack['auth_req_id'])
        check(st == 200 and 'id_token' in tokens, f'tokens after the ping: {st} {tokens}')
        verify_id_token(d, tokens['id_token'], cid)
    finally:
        server.shutdown()


def test_device_key_session():
    """SPEC "CIBA approval": the session that enrolled a device key approves with that key, and only
    that key; the app's session here is an email sign-in, which no passkey began."""
    d = discovery()
    cid, secret = add_client('Bank (device-key session)', '--grant-type', 'ciba', '--ciba-approver', 'device-key')
    client, phone = CIBAClient(cid, secret, d), Phone()
    app_session = phone.email_session()
    key, key_id = phone.enrol_key(app_session)
    st, ack = client.authenticate(scope='openid', login_hint=phone.username)
    check(st == 200, f'ack: {st} {ack}')
    rid = ack['auth_req_id']
    # The key the passkey session enrolled is another session's: step_up_required.
    refused = phone.approve(rid, token=app_session, expect=403)
    check(refused.get('code') == 'step_up_required', f'another session\'s key: {refused}')
    receipt = phone.approve(rid, token=app_session, key=key, key_id=key_id)
    st, tokens = client.token(rid)
    check(st == 200 and payload(tokens['access_token'])['receipt_id'] == receipt, f'tokens: {st} {tokens}')
    # A session that enrolled no key is not an approver at all.
    st, body = client.authenticate(scope='openid', login_hint=phone.username)
    check(st == 200, f'ack: {st} {body}')
    other = phone.email_session()
    r = S.post(f'{BASE}/v1/ciba/requests/{body["auth_req_id"]}/approve', headers={'Authorization': 'Bearer ' + other}, timeout=20)
    check(r.status_code == 403 and r.json().get('code') == 'forbidden', f'a session without a key: {r.status_code} {r.text}')


TESTS = [test_discovery, test_poll_mode, test_denied_and_errors, test_ping_mode, test_device_key_session]

if __name__ == '__main__':
    for t in TESTS:
        try:
            t()
            RESULTS.append((t.__name__, True))
            print(f'ok    {t.__name__}')
        except Exception:
            RESULTS.append((t.__name__, False))
            print(f'FAIL  {t.__name__}')
            traceback.print_exc()
    passed = sum(1 for _, ok in RESULTS if ok)
    print(f'{passed} passed, {len(RESULTS) - passed} failed')
    sys.exit(0 if passed == len(RESULTS) else 1)
