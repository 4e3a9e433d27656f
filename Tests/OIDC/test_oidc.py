#!/usr/bin/env python3
"""Latchkey's OpenID Provider against a real server, driven by a client library nobody here wrote
(Authlib, from PyPI), plus the negative tests SPEC "OpenID Provider" lists. Run by Tests/OIDC/run.sh.

Sign-in is a software passkey (softauthn.py) against the server's /v1 API, standing in for the
person on the /authorize page; the page's approve/deny API is called exactly as the page calls it.
Prints one line per test and closes with 'N passed, N failed'; exit 1 on any failure.
"""
import base64
import hashlib
import http.server
import json
import os
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
from authlib.integrations.requests_client import OAuth2Session
from authlib.jose import JsonWebKey, jwt
from authlib.oauth2.rfc7523 import PrivateKeyJWT
from joserfc.jwk import ECKey as JoseECKey
from authlib.oauth2.rfc7636 import create_s256_code_challenge

import source_address
from softauthn import SoftPasskey, b64u

BASE = os.environ['LATCHKEY_URL'].rstrip('/')
BIN = os.environ['LATCHKEY_BIN']
RP_ID = urllib.parse.urlparse(BASE).hostname
RESULTS = []
S = requests.Session()


def check(cond, what):
    if not cond:
        raise AssertionError(what)


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


def sign_up(username):
    pk = SoftPasskey(RP_ID, BASE)
    st, options = api('POST', '/v1/passkeys/registration/options', {'username': username, 'displayName': username.title()})
    check(st == 200, f'registration options: {st} {options}')
    st, done = api('POST', '/v1/passkeys/registration/verify', pk.create(options))
    check(st == 201, f'registration verify: {st} {done}')
    return pk, done['tokens']['access_token'], done['user']['id']


def sign_in(pk):
    st, options = api('POST', '/v1/passkeys/authentication/options', {})
    check(st == 200, f'authentication options: {st}')
    st, done = api('POST', '/v1/passkeys/authentication/verify', pk.get(options))
    check(st == 200, f'authentication verify: {st} {done}')
    return done['tokens']['access_token']


def add_client(name, *args):
    out = subprocess.run([BIN, 'clients', 'add', name, *args], capture_output=True, text=True, check=True).stdout
    fields = dict(line.split(': ', 1) for line in out.strip().splitlines())
    return fields['client_id'], fields.get('client_secret')


def ec_key():
    """A P-256 key whose public JWK has full-length coordinates. Authlib writes `x` and `y` with
    their leading zero bytes dropped (about 1 key in 110), and RFC 7518 §6.2.1.2 says the octet
    string MUST be the full size of a coordinate, so Latchkey rightly drops such a key from a JWKS."""
    while True:
        key = JsonWebKey.generate_key('EC', 'P-256', is_private=True)
        public = key.as_dict(is_private=False)
        if all(len(base64.urlsafe_b64decode(public[c] + '==')) == 32 for c in ('x', 'y')):
            return key


def serve_jwks(public):
    """A client's jwks_uri on loopback (dev mode lets the server fetch it): (server, its URL).
    `server.hits` counts the fetches it answered."""
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.server.hits += 1
            body = json.dumps({'keys': [public]}).encode()
            self.send_response(200)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass
    server = http.server.HTTPServer(('127.0.0.1', 0), H)
    server.hits = 0
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # A path of its own: a later test's server may get the same port, and the cache is per jwks_uri.
    return server, f'http://127.0.0.1:{server.server_port}/jwks-{secrets.token_hex(4)}.json'


DISCOVERY = None


def authorize_to_request(url):
    """The browser's first hop: /oauth2/authorize answers 303 to the web app's /authorize page."""
    r = S.get(url, allow_redirects=False, timeout=20)
    check(r.status_code == 303, f'authorize: {r.status_code} {r.text[:200]}')
    loc = r.headers['Location']
    q = urllib.parse.parse_qs(urllib.parse.urlparse(loc).query)
    if 'request' not in q:
        return None, loc
    check(loc.startswith(BASE + '/authorize?request='), f'page location {loc}')
    return q['request'][0], loc


ISSUER_ORIGIN = '{0.scheme}://{0.netloc}'.format(urllib.parse.urlparse(BASE))


class OPBrowser:
    """A person's browser on the /authorize page: its own cookie jar (the HttpOnly OP session cookie),
    and the headers a same-origin page's fetch sends (Origin, Sec-Fetch-Site, a JSON body)."""

    def __init__(self, pk):
        self.pk = pk
        self.s = requests.Session()
        self.signed_in = False

    def send(self, method, path, body=None, headers=None, origin=ISSUER_ORIGIN):
        h = {'Sec-Fetch-Site': 'same-origin'}
        if origin:
            h['Origin'] = origin
        if method != 'GET':
            h['Content-Type'] = 'application/json'
        h.update(headers or {})
        data = None if method == 'GET' else json.dumps({} if body is None else body)
        r = self.s.request(method, BASE + path, data=data, headers=h, allow_redirects=False, timeout=20)
        try:
            return r.status_code, r.json(), r
        except ValueError:
            return r.status_code, None, r

    def view(self, request_id, lang=None):
        st, body, _ = self.send('GET', f'/v1/oauth/requests/{request_id}' + (f'?lang={lang}' if lang else ''), origin=None)
        check(st == 200, f'view: {st} {body}')
        return body

    def sign_in(self, request_id):
        view = self.view(request_id)
        st, body, r = self.send('POST', f'/v1/oauth/requests/{request_id}/sign-in', self.pk.get(view['publicKey']))
        check(st == 200 and body['signedIn'], f'sign-in: {st} {body}')
        check('HttpOnly' in r.headers.get('Set-Cookie', ''), f'the OP cookie is HttpOnly: {r.headers.get("Set-Cookie")}')
        self.signed_in = True
        return body

    def approve(self, request_id, step_up=None):
        if not self.signed_in:
            self.sign_in(request_id)
        st, body, _ = self.send('POST', f'/v1/oauth/requests/{request_id}/approve', headers={'Latchkey-Step-Up': step_up} if step_up else {})
        return st, body

    def step_up(self, action):
        st, ch, _ = self.send('POST', '/v1/step-up/challenges', {'method': 'passkey', 'action': action})
        check(st == 201, f'cookie step-up challenge: {st} {ch}')
        st, v, _ = self.send('POST', '/v1/step-up/verify', {'challengeId': ch['challengeId'], 'credential': self.pk.get(ch['publicKey'])})
        check(st == 200, f'cookie step-up verify: {st} {v}')
        return v['access_token']


def approve(request_id, token, step_up=None):
    """As the page does: `token` an OPBrowser (its cookie), or a Bearer access token."""
    if isinstance(token, OPBrowser):
        return token.approve(request_id, step_up)
    headers = {'Latchkey-Step-Up': step_up} if step_up else {}
    return api('POST', f'/v1/oauth/requests/{request_id}/approve', token=token, headers=headers)


def step_up(pk, token, action):
    st, ch = api('POST', '/v1/step-up/challenges', {'method': 'passkey', 'action': action}, token=token)
    check(st == 201, f'step-up challenge: {st} {ch}')
    st, v = api('POST', '/v1/step-up/verify', {'challengeId': ch['challengeId'], 'credential': pk.get(ch['publicKey'])}, token=token)
    check(st == 200, f'step-up verify: {st} {v}')
    return v['access_token']


def query_of(url):
    return {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlparse(url).query).items()}


def jwks():
    return JsonWebKey.import_key_set(S.get(DISCOVERY['jwks_uri'], timeout=10).json())


def decode_id_token(token, client_id, nonce):
    claims = jwt.decode(token, jwks(), claims_options={'iss': {'essential': True, 'value': DISCOVERY['issuer']},
                                                      'aud': {'essential': True, 'value': client_id},
                                                      'nonce': {'essential': True, 'value': nonce}})
    claims.validate()
    return claims


def code_flow(client, token, redirect_uri, scope='openid profile email offline_access', extra=None, step=None):
    """Authlib builds the request; the 'person' approves; returns (session, code redirect, verifier, nonce, state)."""
    verifier = secrets.token_urlsafe(48)
    nonce, state = secrets.token_urlsafe(12), secrets.token_urlsafe(12)
    url, _ = client.create_authorization_url(DISCOVERY['authorization_endpoint'], redirect_uri=redirect_uri, scope=scope, state=state,
                                             nonce=nonce, code_verifier=verifier, **(extra or {}))
    request_id, _ = authorize_to_request(url)
    st, body = approve(request_id, token, step)
    check(st == 200, f'approve: {st} {body}')
    return body['redirectTo'], verifier, nonce, state


# ---------------------------------------------------------------------------------------------

def test_discovery():
    d = DISCOVERY
    for k in ['issuer', 'authorization_endpoint', 'token_endpoint', 'userinfo_endpoint', 'jwks_uri', 'end_session_endpoint',
              'pushed_authorization_request_endpoint', 'revocation_endpoint']:
        check(k in d, f'discovery lacks {k}')
    check(d['code_challenge_methods_supported'] == ['S256'], 'S256 only')
    check('RS256' in d['id_token_signing_alg_values_supported'] and 'ES256' in d['id_token_signing_alg_values_supported'], 'algs')
    check(d['subject_types_supported'] == ['public'], 'subject types')
    check(d['authorization_response_iss_parameter_supported'] is True, 'RFC 9207')
    check(set(d['token_endpoint_auth_methods_supported']) == {'client_secret_basic', 'client_secret_post', 'private_key_jwt', 'none'}, 'auth')
    kinds = {k['kty'] for k in S.get(d['jwks_uri'], timeout=10).json()['keys']}
    check(kinds == {'EC', 'RSA'}, f'JWKS key types {kinds}')


def test_authlib_code_flow_refresh_userinfo_logout():
    cid, secret = add_client('Authlib app', '--redirect-uri', 'https://app.example/cb', '--post-logout-redirect-uri', 'https://app.example/bye')
    client = OAuth2Session(cid, secret, token_endpoint_auth_method='client_secret_basic', code_challenge_method='S256')
    redirect, verifier, nonce, state = code_flow(client, BROWSER, 'https://app.example/cb')
    q = query_of(redirect)
    check(redirect.startswith('https://app.example/cb?'), redirect)
    check(q['iss'] == DISCOVERY['issuer'], 'RFC 9207 iss in the authorization response')
    check(q['state'] == state, 'state echoed')
    tok = client.fetch_token(DISCOVERY['token_endpoint'], authorization_response=redirect, redirect_uri='https://app.example/cb',
                             code_verifier=verifier)
    check({'access_token', 'id_token', 'refresh_token', 'expires_in'} <= set(tok), f'token response {list(tok)}')
    check('authorization_details' not in tok, f'no details were asked for: {tok.get("authorization_details")}')
    check(tok['token_type'].lower() == 'bearer' and tok['expires_in'] <= 300, 'access token lifetime')
    claims = decode_id_token(tok['id_token'], cid, nonce)
    check(claims['sub'] == USER_ID and claims['azp'] == cid and 'sid' in claims and 'auth_time' in claims, f'id_token {dict(claims)}')
    header = json.loads(base64.urlsafe_b64decode(tok['id_token'].split('.')[0] + '=='))
    check(header['alg'] == 'ES256' and 'kid' in header, f'id_token header {header}')
    info = client.get(DISCOVERY['userinfo_endpoint']).json()
    check(info['sub'] == USER_ID and info['preferred_username'] == USERNAME, f'userinfo {info}')
    old_refresh = tok['refresh_token']
    new = client.refresh_token(DISCOVERY['token_endpoint'], refresh_token=old_refresh)
    check(new['refresh_token'] != old_refresh and 'access_token' in new, 'rotated')
    # OpenID Connect Core §12.2: the refreshed id_token keeps sub, auth_time and acr, without a nonce.
    again = jwt.decode(new['id_token'], jwks())
    check(again['sub'] == claims['sub'] and again['auth_time'] == claims['auth_time'] and again['acr'] == claims['acr']
          and 'nonce' not in again, f'refreshed id_token {dict(again)}')
    # Reuse of the rotated-out token revokes the family: the new refresh token dies too.
    r = S.post(DISCOVERY['token_endpoint'], data={'grant_type': 'refresh_token', 'refresh_token': old_refresh}, auth=(cid, secret))
    check(r.status_code == 400 and r.json()['error'] == 'invalid_grant', f'reuse: {r.status_code} {r.text}')
    r = S.post(DISCOVERY['token_endpoint'], data={'grant_type': 'refresh_token', 'refresh_token': new['refresh_token']}, auth=(cid, secret))
    check(r.status_code == 400 and r.json()['error'] == 'invalid_grant', 'family revoked after reuse')
    # A second sign-in, then RP-initiated logout with id_token_hint.
    redirect, verifier, nonce, state = code_flow(client, BROWSER, 'https://app.example/cb')
    tok = client.fetch_token(DISCOVERY['token_endpoint'], authorization_response=redirect, redirect_uri='https://app.example/cb',
                             code_verifier=verifier)
    r = S.get(DISCOVERY['end_session_endpoint'], params={'id_token_hint': tok['id_token'], 'post_logout_redirect_uri': 'https://app.example/bye',
                                                         'state': 'xyz'}, allow_redirects=False)
    check(r.status_code == 303 and r.headers['Location'] == 'https://app.example/bye?state=xyz', f'logout: {r.status_code} {r.headers}')
    r = S.get(DISCOVERY['userinfo_endpoint'], headers={'Authorization': 'Bearer ' + tok['access_token']})
    check(r.status_code == 401, f'userinfo after logout: {r.status_code}')
    r = S.post(DISCOVERY['token_endpoint'], data={'grant_type': 'refresh_token', 'refresh_token': tok['refresh_token']}, auth=(cid, secret))
    check(r.status_code == 400, 'refresh after logout')
    # A post_logout_redirect_uri not registered is never redirected to.
    r = S.get(DISCOVERY['end_session_endpoint'], params={'id_token_hint': tok['id_token'], 'post_logout_redirect_uri': 'https://evil.example/'},
              allow_redirects=False)
    check(r.status_code == 400 and 'Location' not in r.headers, 'unregistered post-logout URI')


def test_client_secret_post_and_revoke():
    cid, secret = add_client('Post app', '--redirect-uri', 'https://post.example/cb', '--auth-method', 'client_secret_post')
    client = OAuth2Session(cid, secret, token_endpoint_auth_method='client_secret_post', code_challenge_method='S256')
    redirect, verifier, nonce, _ = code_flow(client, BROWSER, 'https://post.example/cb')
    tok = client.fetch_token(DISCOVERY['token_endpoint'], authorization_response=redirect, redirect_uri='https://post.example/cb',
                             code_verifier=verifier)
    decode_id_token(tok['id_token'], cid, nonce)
    r = S.post(DISCOVERY['revocation_endpoint'], data={'token': tok['refresh_token'], 'client_id': cid, 'client_secret': secret})
    check(r.status_code == 200, f'revoke {r.status_code}')
    r = S.post(DISCOVERY['token_endpoint'], data={'grant_type': 'refresh_token', 'refresh_token': tok['refresh_token'],
                                                  'client_id': cid, 'client_secret': secret})
    check(r.status_code == 400 and r.json()['error'] == 'invalid_grant', 'revoked refresh token')
    r = S.post(DISCOVERY['token_endpoint'], data={'grant_type': 'refresh_token', 'refresh_token': 'x', 'client_id': cid, 'client_secret': 'wrong'})
    check(r.status_code == 401 and r.json()['error'] == 'invalid_client' and 'WWW-Authenticate' in r.headers, 'bad secret → invalid_client')


def test_public_client_loopback_any_port():
    cid, secret = add_client('Native app', '--public', '--redirect-uri', 'http://127.0.0.1/callback')
    check(secret is None, 'a public client has no secret')
    client = OAuth2Session(cid, None, token_endpoint_auth_method='none', code_challenge_method='S256')
    redirect, verifier, nonce, _ = code_flow(client, BROWSER, 'http://127.0.0.1:53127/callback', scope='openid')
    check(redirect.startswith('http://127.0.0.1:53127/callback?'), redirect)
    tok = client.fetch_token(DISCOVERY['token_endpoint'], authorization_response=redirect, redirect_uri='http://127.0.0.1:53127/callback',
                             code_verifier=verifier)
    decode_id_token(tok['id_token'], cid, nonce)
    check('refresh_token' not in tok, 'no refresh token without offline_access')


def test_token_endpoint_cors_for_public_clients_only():
    cid, _ = add_client('SPA', '--public', '--redirect-uri', 'https://spa.example/cb')
    # The server's client list is at most a second old: a client the CLI just added may take that long to count.
    for _ in range(30):
        r = S.options(DISCOVERY['token_endpoint'], headers={'Origin': 'https://spa.example', 'Access-Control-Request-Method': 'POST'})
        if r.headers.get('Access-Control-Allow-Origin'):
            break
        time.sleep(0.1)
    for origin, allowed in [('https://spa.example', True), ('https://evil.example', False)]:
        r = S.options(DISCOVERY['token_endpoint'], headers={'Origin': origin, 'Access-Control-Request-Method': 'POST'})
        got = r.headers.get('Access-Control-Allow-Origin')
        check((got == origin) if allowed else (got is None), f'preflight from {origin}: {r.status_code} {got}')
        r = S.post(DISCOVERY['token_endpoint'], data={'grant_type': 'refresh_token', 'refresh_token': 'x', 'client_id': cid},
                   headers={'Origin': origin})
        got = r.headers.get('Access-Control-Allow-Origin')
        check((got == origin) if allowed else (got is None), f'token from {origin}: {got}')


def test_revoking_the_passkey_ends_the_oauth_session():
    pk, token, user_id = sign_up('oidc-rev-' + secrets.token_hex(3))
    cid, secret = add_client('Revocation app', '--redirect-uri', 'https://rev.example/cb')
    client = OAuth2Session(cid, secret, code_challenge_method='S256')
    redirect, verifier, _, _ = code_flow(client, OPBrowser(pk), 'https://rev.example/cb')
    tok = client.fetch_token(DISCOVERY['token_endpoint'], authorization_response=redirect, redirect_uri='https://rev.example/cb',
                             code_verifier=verifier)
    # The account's last passkey is its last way in: recovery codes first, so that it may be revoked.
    codes = {'type': 'latchkey.recovery-codes.create'}
    st, body = api('POST', '/v1/recovery-codes', token=token, headers={'Latchkey-Step-Up': step_up(pk, token, codes)})
    check(st == 201, f'recovery codes: {st} {body}')
    action = {'type': 'latchkey.passkey.revoke', 'credentialId': b64u(pk.cred_id)}
    st, body = api('DELETE', f'/v1/passkeys/{b64u(pk.cred_id)}', token=token, headers={'Latchkey-Step-Up': step_up(pk, token, action)})
    check(st == 200, f'passkey revoked: {st} {body}')
    r = S.post(DISCOVERY['token_endpoint'], data={'grant_type': 'refresh_token', 'refresh_token': tok['refresh_token']}, auth=(cid, secret))
    check(r.status_code == 400 and r.json()['error'] == 'invalid_grant', f'the OAuth session ended with the passkey: {r.status_code} {r.text}')


def test_the_docs_flask_example_works_when_pasted():
    """docs/oidc.md's Python web app, exactly as written there (placeholders filled in), run with Flask's
    test client: /login → the page's approval → /auth/callback signs the user in with the userinfo
    profile and lands on / (which names them); /pay asks for the payment; Deny and a forged callback
    get pages that say so (not a 404 or a 500); /logout signs out."""
    import re
    doc = open(os.path.join(os.path.dirname(__file__), '..', '..', 'docs', 'oidc.md'), encoding='utf-8').read()
    block = re.search(r'## 2\. A Python web app.*?```python\n(.*?)```', doc, re.S).group(1)
    cid, secret = add_client('Docs example', '--redirect-uri', 'http://localhost/auth/callback', '--authorization-details-type', 'payment_initiation')
    code = block.replace('lkc_…', cid).replace('lks_…', secret).replace('https://login.example.com', BASE)
    namespace = {'__name__': 'docs_example'}
    exec(compile(code, 'docs/oidc.md', 'exec'), namespace)
    web = namespace['app'].test_client()
    r = web.get('/login')
    check(r.status_code == 302 and r.headers['Location'].startswith(DISCOVERY['authorization_endpoint']), f'/login: {r.status_code}')
    request_id, _ = authorize_to_request(r.headers['Location'])
    st, body = approve(request_id, BROWSER)
    check(st == 200 and body['redirectTo'].startswith('http://localhost/auth/callback?'), f'approve {st} {body}')
    r = web.get('/auth/callback?' + urllib.parse.urlsplit(body['redirectTo']).query)
    check(r.status_code == 302, f'callback: {r.status_code} {r.get_data(as_text=True)[:300]}')
    with web.session_transaction() as session:
        user = session['user']
        check(user['sub'] == USER_ID, f'signed in: {user}')
        # The profile claims, from the userinfo endpoint as the page says.
        check(user.get('preferred_username') and 'name' in user, f'the profile claims: {user}')
    # Where the callback sends the person: the app's own page, which names them.
    r = web.get(r.headers['Location'])
    page = r.get_data(as_text=True)
    check(r.status_code == 200 and 'Signed in as' in page, f'/ after the sign-in: {r.status_code} {page[:300]}')
    r = web.get('/pay')
    request_id, _ = authorize_to_request(r.headers['Location'])
    st, view = api('GET', f'/v1/oauth/requests/{request_id}')
    check(view['authorizationDetails'][0]['creditorName'] == 'Merchant A', f'the payment is asked for: {view}')
    # Deny: the callback gets ?error=access_denied and says so (no server error).
    r = web.get('/login')
    request_id, _ = authorize_to_request(r.headers['Location'])
    st, body = api('POST', f'/v1/oauth/requests/{request_id}/deny', token=USER_TOKEN)
    check(st == 200 and 'error=access_denied' in body['redirectTo'], f'deny: {st} {body}')
    r = web.get('/auth/callback?' + urllib.parse.urlsplit(body['redirectTo']).query)
    check(r.status_code == 403 and 'did not allow' in r.get_data(as_text=True), f'callback after Deny: {r.status_code} {r.get_data(as_text=True)[:300]}')
    # A callback that is not the answer to this browser's request (a stale or forged state): a 400 page, not a 500.
    r = web.get('/auth/callback?code=forged&state=forged')
    check(r.status_code == 400 and 'Signing in failed' in r.get_data(as_text=True), f'forged callback: {r.status_code} {r.get_data(as_text=True)[:300]}')
    r = web.get('/logout')
    check(r.status_code == 302 and 'Sign in with Latchkey' in web.get('/').get_data(as_text=True), 'signed out')


def test_rs256_id_token():
    cid, secret = add_client('RS256 app', '--redirect-uri', 'https://rs.example/cb', '--id-token-alg', 'RS256')
    client = OAuth2Session(cid, secret, code_challenge_method='S256')
    redirect, verifier, nonce, _ = code_flow(client, BROWSER, 'https://rs.example/cb')
    tok = client.fetch_token(DISCOVERY['token_endpoint'], authorization_response=redirect, redirect_uri='https://rs.example/cb',
                             code_verifier=verifier)
    header = json.loads(base64.urlsafe_b64decode(tok['id_token'].split('.')[0] + '=='))
    check(header['alg'] == 'RS256', f'header {header}')
    decode_id_token(tok['id_token'], cid, nonce)


def test_code_replay_revokes():
    cid, secret = add_client('Replay app', '--redirect-uri', 'https://replay.example/cb')
    client = OAuth2Session(cid, secret, code_challenge_method='S256')
    redirect, verifier, _, _ = code_flow(client, BROWSER, 'https://replay.example/cb')
    form = {'grant_type': 'authorization_code', 'code': query_of(redirect)['code'], 'redirect_uri': 'https://replay.example/cb',
            'code_verifier': verifier}
    first = S.post(DISCOVERY['token_endpoint'], data=form, auth=(cid, secret))
    check(first.status_code == 200, f'first use {first.text}')
    second = S.post(DISCOVERY['token_endpoint'], data=form, auth=(cid, secret))
    check(second.status_code == 400 and second.json()['error'] == 'invalid_grant', 'replay refused')
    r = S.get(DISCOVERY['userinfo_endpoint'], headers={'Authorization': 'Bearer ' + first.json()['access_token']})
    check(r.status_code == 401, f'the first use\'s access token is revoked: {r.status_code}')
    r = S.post(DISCOVERY['token_endpoint'], data={'grant_type': 'refresh_token', 'refresh_token': first.json()['refresh_token']}, auth=(cid, secret))
    check(r.status_code == 400, 'the first use\'s refresh token is revoked')


# ---- Issue 32: each hole of "Tried as an attacker" closed, over real HTTP and PostgreSQL -------------

def grant_from(browser_or_token, pk=None, scope='openid offline_access', step=True):
    """A confidential client's grant approved by `browser_or_token` (an OPBrowser, or a Bearer token
    of `pk`'s account with its step-up for the request): (client, cid, secret, tokens)."""
    cid, secret = add_client('Grant app ' + secrets.token_hex(2), '--redirect-uri', 'https://grant.example/cb')
    client = OAuth2Session(cid, secret, code_challenge_method='S256')
    verifier = secrets.token_urlsafe(48)
    url, _ = client.create_authorization_url(DISCOVERY['authorization_endpoint'], redirect_uri='https://grant.example/cb', scope=scope,
                                             code_verifier=verifier)
    request_id, _ = authorize_to_request(url)
    if isinstance(browser_or_token, OPBrowser):
        st, body = approve(request_id, browser_or_token)
    else:
        st, view = api('GET', f'/v1/oauth/requests/{request_id}')
        st, body = approve(request_id, browser_or_token, step_up(pk, browser_or_token, view['stepUpAction']))
    check(st == 200, f'approve: {st} {body}')
    return client, cid, secret, body['redirectTo'], verifier


def exchange(client, redirect, verifier):
    return client.fetch_token(DISCOVERY['token_endpoint'], authorization_response=redirect, redirect_uri='https://grant.example/cb',
                              code_verifier=verifier)


def refresh_status(cid, secret, refresh_token, **extra):
    r = S.post(DISCOVERY['token_endpoint'], data={'grant_type': 'refresh_token', 'refresh_token': refresh_token, **extra}, auth=(cid, secret))
    return r.status_code, r.json()


def test_issue32_stolen_access_token_alone_approves_nothing():
    """A stolen 5-minute access token (or one minted from a stolen refresh token) cannot approve a
    request: a Bearer alone is 403 step_up_required, for a plain sign-in too (SPEC "Who may approve")."""
    pk, token, _ = sign_up('thief-' + secrets.token_hex(3))
    cid, _ = add_client('Any app', '--redirect-uri', 'https://any.example/cb')
    r, _ = raw_authorize(cid, redirect_uri='https://any.example/cb', scope='openid offline_access')
    request_id = query_of(r.headers['Location'])['request']
    st, body = approve(request_id, token)
    check(st == 403 and body['code'] == 'step_up_required', f'a Bearer alone: {st} {body}')
    # A step-up made in another session (sid) is not this Bearer's.
    other = sign_in(pk)
    st, view = api('GET', f'/v1/oauth/requests/{request_id}')
    foreign = step_up(pk, other, view['stepUpAction'])
    st, body = approve(request_id, token, foreign)
    check(st == 403 and body['code'] == 'step_up_required', f'a step-up of another session: {st} {body}')
    st, body = approve(request_id, token, step_up(pk, token, view['stepUpAction']))
    check(st == 200, f'the Bearer with its own step-up for this request: {st} {body}')


def test_issue32_grant_dies_when_the_owner_ends_the_approving_session():
    pk, token, _ = sign_up('owner-' + secrets.token_hex(3))
    client, cid, secret, redirect, verifier = grant_from(token, pk)
    tok = exchange(client, redirect, verifier)
    sid = json.loads(base64.urlsafe_b64decode(token.split('.')[1] + '=='))['sid']
    other = sign_in(pk)
    st, _ = api('DELETE', f'/v1/sessions/{sid}', token=other)
    check(st == 204, f'the owner ends the stolen session: {st}')
    st, body = refresh_status(cid, secret, tok['refresh_token'])
    check(st == 400 and body['error'] == 'invalid_grant', f'the grant died with its approving session: {st} {body}')
    r = S.get(DISCOVERY['userinfo_endpoint'], headers={'Authorization': 'Bearer ' + tok['access_token']})
    check(r.status_code == 401, f'its access token too, at once: {r.status_code}')


def test_issue32_code_held_across_the_passkey_revocation_is_refused():
    pk, token, _ = sign_up('held-' + secrets.token_hex(3))
    second = SoftPasskey(RP_ID, BASE)
    st, options = api('POST', '/v1/passkeys/registration/options', {}, token=token,
                      headers={'Latchkey-Step-Up': step_up(pk, token, {'type': 'latchkey.passkey.add'})})
    check(st == 200, f'second passkey options: {st} {options}')
    st, done = api('POST', '/v1/passkeys/registration/verify', second.create(options), token=token)
    check(st == 201, f'second passkey: {st} {done}')
    browser = OPBrowser(pk)
    client, cid, secret, redirect, verifier = grant_from(browser)
    # The code is held while the approving passkey is revoked (from a session of the other passkey).
    other = sign_in(second)
    action = {'type': 'latchkey.passkey.revoke', 'credentialId': b64u(pk.cred_id)}
    st, _ = api('DELETE', f'/v1/passkeys/{b64u(pk.cred_id)}', token=other, headers={'Latchkey-Step-Up': step_up(second, other, action)})
    check(st == 200, f'passkey revoked: {st}')
    r = S.post(DISCOVERY['token_endpoint'], auth=(cid, secret), data={
        'grant_type': 'authorization_code', 'code': query_of(redirect)['code'], 'redirect_uri': 'https://grant.example/cb', 'code_verifier': verifier})
    check(r.status_code == 400 and r.json()['error'] == 'invalid_grant', f'the held code: {r.status_code} {r.text}')


def test_issue32_refresh_reuse_of_the_approving_session_revokes_the_grant():
    pk, token, _ = sign_up('reuse-' + secrets.token_hex(3))
    st, signed = api('POST', '/v1/passkeys/authentication/verify', pk.get(api('POST', '/v1/passkeys/authentication/options', {})[1]))
    token, first_refresh = signed['tokens']['access_token'], signed['tokens']['refresh_token']
    client, cid, secret, redirect, verifier = grant_from(token, pk)
    tok = exchange(client, redirect, verifier)
    st, _ = api('POST', '/v1/token', {'grant_type': 'refresh_token', 'refresh_token': first_refresh})
    check(st == 200, f'first refresh: {st}')
    st, body = api('POST', '/v1/token', {'grant_type': 'refresh_token', 'refresh_token': first_refresh})
    check(st == 400 and body['code'] == 'invalid_grant', f'reuse detected: {st} {body}')
    st, body = refresh_status(cid, secret, tok['refresh_token'])
    check(st == 400 and body['error'] == 'invalid_grant', f'the grant died with the reused session: {st} {body}')


def test_issue32_a_logout_ends_its_session_alone():
    pk, token, _ = sign_up('logout-' + secrets.token_hex(3))
    client, cid, secret, redirect, verifier = grant_from(token, pk)
    tok = exchange(client, redirect, verifier)
    st, _ = api('POST', '/v1/logout', token=token)
    check(st == 204, f'logout: {st}')
    st, body = refresh_status(cid, secret, tok['refresh_token'])
    check(st == 200 and 'access_token' in body, f'a logout never kills a grant: {st} {body}')


def test_issue32_a_payment_approval_is_used_once():
    cid, secret = add_client('Once shop', '--redirect-uri', 'https://once.example/cb', '--authorization-details-type', 'payment_initiation')
    details = [{'type': 'payment_initiation', 'instructedAmount': {'currency': 'EUR', 'amount': '42.00'}, 'creditorName': 'Merchant A'}]
    client = OAuth2Session(cid, secret, code_challenge_method='S256')
    verifier = secrets.token_urlsafe(48)
    url, _ = client.create_authorization_url(DISCOVERY['authorization_endpoint'], redirect_uri='https://once.example/cb',
                                             scope='openid offline_access', code_verifier=verifier, authorization_details=json.dumps(details))
    request_id, _ = authorize_to_request(url)
    view = BROWSER.view(request_id)
    st, body = approve(request_id, BROWSER, BROWSER.step_up(view['stepUpAction']))
    check(st == 200, f'approve: {st} {body}')
    tok = client.fetch_token(DISCOVERY['token_endpoint'], authorization_response=body['redirectTo'], redirect_uri='https://once.example/cb',
                             code_verifier=verifier)
    first = json.loads(base64.urlsafe_b64decode(tok['access_token'].split('.')[1] + '=='))
    check(first.get('authorization_details') == details and first.get('receipt_id'), 'the exchange carries the approval')
    st, refreshed = refresh_status(cid, secret, tok['refresh_token'])
    check(st == 200, f'refresh: {st} {refreshed}')
    again = json.loads(base64.urlsafe_b64decode(refreshed['access_token'].split('.')[1] + '=='))
    check('authorization_details' not in again and 'receipt_id' not in again and 'authorization_details' not in refreshed,
          f'a refresh carries no approval: {again} {list(refreshed)}')
    st, body = refresh_status(cid, secret, refreshed['refresh_token'], authorization_details=json.dumps(details))
    check(st == 400 and body['error'] == 'invalid_authorization_details', f'asked again at the token endpoint: {st} {body}')
    st, body = refresh_status(cid, secret, refreshed['refresh_token'])
    check(st == 200, f'that refusal left the token as it was: {st} {body}')


def test_issue32_the_page_shows_every_member_it_approves():
    cid, _ = add_client('Show shop', '--redirect-uri', 'https://show.example/cb', '--authorization-details-type', 'payment_initiation')
    detail = {'type': 'payment_initiation', 'instructedAmount': {'currency': 'EUR', 'amount': '42.00'}, 'creditorName': 'Merchant A',
              'creditorAccount': {'iban': 'DE02100100109307118603'}, 'remittanceInformationUnstructured': 'Invoice 7781 attacker-ref',
              'x-extra': 'hidden-payload'}
    r, _ = raw_authorize(cid, redirect_uri='https://show.example/cb', authorization_details=json.dumps([detail]))
    request_id = query_of(r.headers['Location'])['request']
    for lang in ['en', 'de', 'pl', 'zh-Hans']:
        view = BROWSER.view(request_id, lang)
        text = '\n'.join(view['display']['lines'])
        for value in ['DE02100100109307118603', 'Invoice 7781 attacker-ref', 'hidden-payload', 'Merchant A', 'show.example']:
            check(value in text, f'{lang}: {value} missing from {view["display"]}')
        check(view['display']['lang'] == lang, f'{lang}: {view["display"]["lang"]}')


def test_issue32_the_cookie_is_accepted_only_from_the_issuers_page():
    browser = OPBrowser(PASSKEY)
    cid, _ = add_client('Cookie app', '--redirect-uri', 'https://cookie.example/cb')
    r, _ = raw_authorize(cid, redirect_uri='https://cookie.example/cb')
    request_id = query_of(r.headers['Location'])['request']
    # A sign-in from another origin is refused before anything is looked at.
    view = browser.view(request_id)
    st, body, _ = browser.send('POST', f'/v1/oauth/requests/{request_id}/sign-in', PASSKEY.get(view['publicKey']), origin='https://evil.example')
    check(st == 403 and body['code'] == 'forbidden', f'cross-origin sign-in: {st} {body}')
    browser.sign_in(request_id)
    # Cross-site, or no Origin, or a form body: refused.
    st, body, _ = browser.send('POST', f'/v1/oauth/requests/{request_id}/approve', origin='https://evil.example')
    check(st == 403, f'cross-origin approve: {st} {body}')
    st, body, _ = browser.send('POST', f'/v1/oauth/requests/{request_id}/approve', origin=None)
    check(st == 403, f'approve without Origin: {st} {body}')
    st, body, _ = browser.send('POST', f'/v1/oauth/requests/{request_id}/approve', headers={'Content-Type': 'application/x-www-form-urlencoded'})
    check(st == 415, f'a form body: {st} {body}')
    st, body, _ = browser.send('POST', f'/v1/oauth/requests/{request_id}/approve', headers={'Sec-Fetch-Site': 'cross-site'})
    check(st == 403, f'Sec-Fetch-Site cross-site: {st} {body}')
    # The cookie alone is no key to any other route.
    for method, path in [('GET', '/v1/passkeys'), ('GET', '/v1/sessions'), ('POST', '/v1/logout'), ('GET', '/v1/device-keys'),
                         ('POST', '/v1/recovery-codes'), ('GET', '/oauth2/userinfo')]:
        st, body, _ = browser.send(method, path)
        check(st == 401, f'{method} {path} with the cookie alone: {st} {body}')
    # The page's own routes answer no CORS.
    r = browser.s.options(BASE + f'/v1/oauth/requests/{request_id}/approve', headers={'Origin': ISSUER_ORIGIN, 'Access-Control-Request-Method': 'POST'})
    check('Access-Control-Allow-Origin' not in r.headers, f'CORS on a cookie route: {r.headers}')
    st, body = approve(request_id, browser)
    check(st == 200, f'the same-origin approve: {st} {body}')
    # The cookie session is listed as a browser session, and ending it there ends it.
    st, listed = api('GET', '/v1/sessions', token=USER_TOKEN)
    check(any(x['browser'] for x in listed['sessions']), f'the OP session is listed: {listed}')


def test_issue32_a_refused_refresh_leaves_the_token():
    client, cid, secret, redirect, verifier = grant_from(BROWSER)
    tok = exchange(client, redirect, verifier)
    st, body = refresh_status(cid, secret, tok['refresh_token'], scope='openid offline_access email')
    check(st == 400 and body['error'] == 'invalid_scope', f'a wider scope: {st} {body}')
    other_cid, other_secret = add_client('Other app', '--redirect-uri', 'https://other.example/cb')
    r = S.post(DISCOVERY['token_endpoint'], data={'grant_type': 'refresh_token', 'refresh_token': tok['refresh_token']}, auth=(other_cid, other_secret))
    check(r.status_code == 400 and r.json()['error'] == 'invalid_grant', f'another client: {r.status_code} {r.text}')
    st, body = refresh_status(cid, secret, tok['refresh_token'], scope='openid')
    check(st == 200 and body['scope'] == 'openid', f'the token was left as it was, and narrows: {st} {body}')
    st, body = refresh_status(cid, secret, body['refresh_token'])
    check(st == 200, f'the next good refresh is no reuse: {st} {body}')


def test_issue32_sessions_name_their_client():
    client, cid, secret, redirect, verifier = grant_from(BROWSER)
    exchange(client, redirect, verifier)
    st, listed = api('GET', '/v1/sessions', token=USER_TOKEN)
    mine = [x for x in listed['sessions'] if x['clientId'] == cid]
    check(len(mine) == 1 and mine[0]['method'] == 'oauth' and mine[0]['clientName'].startswith('Grant app'), f'sessions: {listed}')


def test_issue32_private_key_jwt_client_has_no_secret_and_assertions_are_checked():
    key = ec_key()
    public = dict(key.as_dict(is_private=False), kid='n1')

    server, jwks_url = serve_jwks(public)
    try:
        cid, secret = add_client('Keys only', '--redirect-uri', 'https://jwt.example/cb', '--jwks-uri', jwks_url)
        check(secret is None, 'a private_key_jwt client is given no secret')
        r = S.post(DISCOVERY['token_endpoint'], data={'grant_type': 'refresh_token', 'refresh_token': 'x'}, auth=(cid, 'lks_guess'))
        check(r.status_code == 401 and r.json()['error'] == 'invalid_client', f'a secret for a private_key_jwt client: {r.status_code}')
        now = int(time.time())
        early = jwt.encode({'alg': 'ES256', 'kid': 'n1'}, {'iss': cid, 'sub': cid, 'aud': DISCOVERY['token_endpoint'], 'jti': secrets.token_hex(8),
                                                          'iat': now, 'nbf': now + 600, 'exp': now + 120}, key).decode()
        r = S.post(DISCOVERY['token_endpoint'], data={'grant_type': 'refresh_token', 'refresh_token': 'x', 'client_id': cid,
                                                      'client_assertion_type': 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
                                                      'client_assertion': early})
        check(r.status_code == 401 and r.json()['error'] == 'invalid_client', f'an assertion before its nbf: {r.status_code} {r.text}')
    finally:
        server.shutdown()


def test_issue32_a_forged_assertion_with_a_known_kid_fetches_no_jwks():
    """The hole: a forged client assertion naming a kid the client's JWKS holds fetched its jwks_uri
    every time. SPEC "Client authentication": a forged signature with a known kid never triggers a
    fetch, and an unknown kid at most one a minute. Counted on the jwks_uri's own server."""
    key = ec_key()
    forger = ec_key()
    server, jwks_url = serve_jwks(dict(key.as_dict(is_private=False), kid='f1'))
    try:
        cid, _ = add_client('Forged kid', '--redirect-uri', 'https://jwt.example/cb', '--jwks-uri', jwks_url)

        def token_request(signer, kid):
            now = int(time.time())
            assertion = jwt.encode({'alg': 'ES256', 'kid': kid}, {'iss': cid, 'sub': cid, 'aud': DISCOVERY['token_endpoint'],
                                                                  'jti': secrets.token_hex(8), 'iat': now, 'exp': now + 120}, signer).decode()
            return S.post(DISCOVERY['token_endpoint'], data={
                'grant_type': 'refresh_token', 'refresh_token': 'lkor_nothing', 'client_id': cid,
                'client_assertion_type': 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', 'client_assertion': assertion})
        # The client's own assertion: its set fetched once (nothing to verify with before).
        r = token_request(key, 'f1')
        check(r.status_code == 400 and r.json()['error'] == 'invalid_grant', f'the client authenticates: {r.status_code} {r.text}')
        check(server.hits == 1, f'the first assertion fetches the set once: {server.hits}')
        # Forged signatures naming the known kid: refused, and no fetch at all.
        for _ in range(5):
            r = token_request(forger, 'f1')
            check(r.status_code == 401 and r.json()['error'] == 'invalid_client', f'a forged assertion: {r.status_code} {r.text}')
        check(server.hits == 1, f'forged assertions with a known kid fetched the JWKS {server.hits - 1} times')
        # Unknown kids: within the minute of the last fetch, none either.
        for i in range(3):
            r = token_request(forger, f'unknown-{i}')
            check(r.status_code == 401 and r.json()['error'] == 'invalid_client', f'an unknown kid: {r.status_code} {r.text}')
        check(server.hits == 1, f'unknown kids within the minute fetched the JWKS {server.hits - 1} times')
        # The client still authenticates with its key.
        r = token_request(key, 'f1')
        check(r.status_code == 400 and r.json()['error'] == 'invalid_grant' and server.hits == 1, f'the client again: {r.status_code} {server.hits}')
    finally:
        server.shutdown()


def test_issue32_failed_client_authentications_are_limited_per_client_and_address():
    cid, secret = add_client('Guessed app', '--redirect-uri', 'https://guess.example/cb')
    form = {'grant_type': 'refresh_token', 'refresh_token': 'lkor_nothing'}
    statuses = [S.post(DISCOVERY['token_endpoint'], data=form, auth=(cid, 'wrong')).status_code for _ in range(21)]
    check(statuses[:20] == [401] * 20 and statuses[20] == 429, f'statuses {statuses}')
    r = S.post(DISCOVERY['token_endpoint'], data=form, auth=(cid, 'wrong'))
    check(r.status_code == 429 and r.json()['error'] == 'temporarily_unavailable' and 'Retry-After' in r.headers, f'limited: {r.status_code} {r.text}')
    r = S.post(DISCOVERY['token_endpoint'], data=form, auth=(cid, secret))
    check(r.status_code == 400 and r.json()['error'] == 'invalid_grant', f'the right secret is never refused by the counter: {r.status_code} {r.text}')


def test_issue32_authorize_by_post_and_discovery():
    cid, _ = add_client('Form app', '--redirect-uri', 'https://form.example/cb')
    verifier = secrets.token_urlsafe(48)
    r = S.post(DISCOVERY['authorization_endpoint'], allow_redirects=False, data={
        'response_type': 'code', 'client_id': cid, 'redirect_uri': 'https://form.example/cb', 'scope': 'openid',
        'code_challenge': create_s256_code_challenge(verifier), 'code_challenge_method': 'S256'})
    check(r.status_code == 303 and '/authorize?request=' in r.headers['Location'], f'POST /oauth2/authorize: {r.status_code} {r.text[:200]}')
    check(DISCOVERY['request_uri_parameter_supported'] is False, 'discovery does not claim request_uri support it refuses')
    check(DISCOVERY['ui_locales_supported'] == ['en', 'de', 'pl', 'zh'], f'ui_locales {DISCOVERY.get("ui_locales_supported")}')
    check(DISCOVERY['acr_values_supported'][:2] == ['phrh', 'phr'], f'EAP acr values {DISCOVERY.get("acr_values_supported")}')
    check(DISCOVERY['token_endpoint_auth_signing_alg_values_supported'] == ['ES256', 'PS256', 'RS256'], 'assertion algorithms')
    r = S.get(DISCOVERY['authorization_endpoint'], params={'client_id': 'lkc_AAAAAAAAAAAAAAAAAAAAAA'}, headers={'Accept-Language': 'de-DE'},
              allow_redirects=False)
    check(r.status_code == 400 and 'lang="de"' in r.text and '/app.css' in r.text, f'the 400 page in German, styled: {r.text[:300]}')


def test_issue32_silent_sign_in_from_the_op_session_and_consent():
    browser = OPBrowser(PASSKEY)
    cid, secret = add_client('Silent app', '--redirect-uri', 'https://silent.example/cb', '--authorization-details-type', 'payment_initiation')
    r, _ = raw_authorize(cid, redirect_uri='https://silent.example/cb', scope='openid profile')
    request_id = query_of(r.headers['Location'])['request']
    st, body = approve(request_id, browser)
    check(st == 200, f'the first approval: {st} {body}')

    def silent(jar, **params):
        verifier = secrets.token_urlsafe(48)
        p = {'response_type': 'code', 'client_id': cid, 'redirect_uri': 'https://silent.example/cb', 'scope': 'openid profile',
             'state': 'quiet', 'nonce': 'n-silent', 'prompt': 'none', 'code_challenge': create_s256_code_challenge(verifier),
             'code_challenge_method': 'S256'}
        p.update(params)
        resp = jar.get(DISCOVERY['authorization_endpoint'], params={k: v for k, v in p.items() if v is not None}, allow_redirects=False)
        check(resp.status_code == 303 and resp.headers['Location'].startswith('https://silent.example/cb?'), f'{resp.status_code} {resp.text[:200]}')
        return query_of(resp.headers['Location']), verifier
    q, verifier = silent(browser.s)
    check('code' in q and q['state'] == 'quiet' and q['iss'] == DISCOVERY['issuer'], f'a silent sign-in answers with a code: {q}')
    tok = OAuth2Session(cid, secret).fetch_token(DISCOVERY['token_endpoint'], code=q['code'], redirect_uri='https://silent.example/cb',
                                                code_verifier=verifier)
    claims = decode_id_token(tok['id_token'], cid, 'n-silent')
    check(claims['acr'] in ('phr', 'phrh') and {'pop', 'user', 'mfa'} <= set(claims['amr']), f'EAP acr and RFC 8176 amr: {dict(claims)}')
    check(silent(S)[0].get('error') == 'login_required', 'no OP session cookie')
    check(silent(browser.s, max_age='0')[0].get('error') == 'login_required', 'an elapsed max_age')
    check(silent(browser.s, scope='openid email')[0].get('error') == 'consent_required', 'scopes never approved')
    details = json.dumps([{'type': 'payment_initiation', 'instructedAmount': {'currency': 'EUR', 'amount': '1.00'}, 'creditorName': 'X'}])
    check(silent(browser.s, authorization_details=details)[0].get('error') == 'interaction_required', 'details need the page')
    check(silent(browser.s, prompt='none login')[0].get('error') == 'invalid_request', 'none with another prompt')
    st, listed, _ = browser.send('GET', '/v1/oauth/consents', origin=None)
    mine = [c for c in listed['consents'] if c['clientId'] == cid]
    check(st == 200 and mine and set(mine[0]['scopes']) == {'openid', 'profile'}, f'consents: {st} {listed}')
    st, _, _ = browser.send('DELETE', f'/v1/oauth/consents/{cid}')
    check(st == 204, f'forget the consent: {st}')
    check(silent(browser.s)[0].get('error') == 'consent_required', 'a forgotten consent')
    st, _, _ = browser.send('DELETE', f'/v1/oauth/consents/{cid}')
    check(st == 404, f'none left: {st}')


def test_issue32_pkce_optional_for_a_confidential_client_only():
    r = subprocess.run([BIN, 'clients', 'add', 'Public no PKCE', '--public', '--redirect-uri', 'http://127.0.0.1/cb', '--pkce', 'optional'],
                       capture_output=True, text=True)
    check(r.returncode == 64, f'a public client cannot drop PKCE: {r.returncode} {r.stderr}')
    cid, secret = add_client('Legacy app', '--redirect-uri', 'https://neg.example/cb', '--pkce', 'optional')
    r, _ = raw_authorize(cid, code_challenge=None, code_challenge_method=None)
    check(query_of(r.headers['Location']).get('error') == 'invalid_request', 'without PKCE a nonce is required')
    for verifier_sent in (True, False):
        r, _ = raw_authorize(cid, code_challenge=None, code_challenge_method=None, nonce='legacy-nonce')
        request_id = query_of(r.headers['Location'])['request']
        st, body = approve(request_id, BROWSER)
        check(st == 200, f'approve: {st} {body}')
        form = {'grant_type': 'authorization_code', 'code': query_of(body['redirectTo'])['code'], 'redirect_uri': 'https://neg.example/cb'}
        if verifier_sent:
            form['code_verifier'] = secrets.token_urlsafe(48)
        t = S.post(DISCOVERY['token_endpoint'], data=form, auth=(cid, secret))
        if verifier_sent:
            check(t.status_code == 400 and t.json()['error'] == 'invalid_grant', f'a verifier for a code without a challenge: {t.text}')
        else:
            check(t.status_code == 200, f'the code without PKCE: {t.status_code} {t.text}')
            decode_id_token(t.json()['id_token'], cid, 'legacy-nonce')
    # A code issued with a challenge is refused without its verifier, even for this client.
    r, verifier = raw_authorize(cid)
    st, body = approve(query_of(r.headers['Location'])['request'], BROWSER)
    t = S.post(DISCOVERY['token_endpoint'], auth=(cid, secret),
               data={'grant_type': 'authorization_code', 'code': query_of(body['redirectTo'])['code'], 'redirect_uri': 'https://neg.example/cb'})
    check(t.status_code == 400 and t.json()['error'] == 'invalid_grant', f'PKCE downgrade: {t.text}')


def test_issue32_logout_asks_before_ending_the_op_session():
    browser = OPBrowser(PASSKEY)
    cid, secret = add_client('Logout app', '--redirect-uri', 'https://bye.example/cb', '--post-logout-redirect-uri', 'https://bye.example/out')
    r, verifier = raw_authorize(cid, redirect_uri='https://bye.example/cb', scope='openid offline_access')
    request_id = query_of(r.headers['Location'])['request']
    st, body = approve(request_id, browser)
    check(st == 200, f'approve: {st} {body}')
    tok = S.post(DISCOVERY['token_endpoint'], auth=(cid, secret), data={'grant_type': 'authorization_code', 'code': query_of(body['redirectTo'])['code'],
                                                                         'redirect_uri': 'https://bye.example/cb', 'code_verifier': verifier}).json()
    # A new sign-in on the page: the hint names the OP session it replaced.
    r, _ = raw_authorize(cid, redirect_uri='https://bye.example/cb')
    browser.sign_in(query_of(r.headers['Location'])['request'])
    logout = {'id_token_hint': tok['id_token'], 'post_logout_redirect_uri': 'https://bye.example/out', 'state': 'st-out'}
    page = browser.s.get(DISCOVERY['end_session_endpoint'], params=logout, allow_redirects=False, headers={'Accept-Language': 'de'})
    check(page.status_code == 200 and 'data-state="confirm"' in page.text and 'lang="de"' in page.text and '/logout.js' in page.text,
          f'the confirmation page: {page.status_code} {page.text[:300]}')
    st, body = refresh_status(cid, secret, tok['refresh_token'])
    check(st == 400 and body['error'] == 'invalid_grant', f'the grant the hint names ended at once: {st} {body}')
    st, body, _ = browser.send('POST', '/oauth2/logout', {'confirm': True, 'client_id': cid, 'post_logout_redirect_uri': 'https://bye.example/out'},
                               origin='https://evil.example')
    check(st == 403, f'a confirmation from another origin: {st} {body}')
    st, body, _ = browser.send('POST', '/oauth2/logout', {'confirm': False, 'client_id': cid, 'post_logout_redirect_uri': 'https://bye.example/out',
                                                          'state': 'st-out'})
    check(st == 200 and body['redirectTo'] == 'https://bye.example/out?state=st-out', f'stay signed in: {st} {body}')
    st, _, _ = browser.send('GET', '/v1/oauth/consents', origin=None)
    check(st == 200, f'the OP session lives on: {st}')
    st, body, r = browser.send('POST', '/oauth2/logout', {'confirm': True})
    check(st == 200 and body['redirectTo'] is None and 'Max-Age=0' in r.headers.get('Set-Cookie', ''), f'sign out of Latchkey: {st} {body}')
    st, _, _ = browser.send('GET', '/v1/oauth/consents', origin=None)
    check(st == 401, f'the OP session ended: {st}')
    st, body, _ = browser.send('POST', '/oauth2/logout', {'confirm': True, 'client_id': cid, 'post_logout_redirect_uri': 'https://evil.example/'})
    check(st == 400, f'an unregistered post_logout_redirect_uri: {st} {body}')


def raw_authorize(cid, **params):
    verifier = secrets.token_urlsafe(48)
    p = {'response_type': 'code', 'client_id': cid, 'redirect_uri': 'https://neg.example/cb', 'scope': 'openid', 'state': 'st8',
         'code_challenge': create_s256_code_challenge(verifier), 'code_challenge_method': 'S256'}
    p.update(params)
    p = {k: v for k, v in p.items() if v is not None}
    return S.get(DISCOVERY['authorization_endpoint'], params=p, allow_redirects=False), verifier


def test_negative_authorization_requests():
    cid, secret = add_client('Negative app', '--redirect-uri', 'https://neg.example/cb', '--authorization-details-type', 'payment_initiation')
    # Unknown client, unregistered redirect URI: a 400 page, never a redirect.
    r, _ = raw_authorize('lkc_AAAAAAAAAAAAAAAAAAAAAA')
    check(r.status_code == 400 and 'Location' not in r.headers, 'unknown client')
    r, _ = raw_authorize(cid, redirect_uri='https://neg.example/cb/other')
    check(r.status_code == 400 and 'Location' not in r.headers, 'redirect-URI mismatch')
    r, _ = raw_authorize(cid, redirect_uri='https://evil.example/cb')
    check(r.status_code == 400 and 'Location' not in r.headers, 'foreign redirect URI')

    def error_of(resp):
        check(resp.status_code == 303, f'{resp.status_code} {resp.text[:200]}')
        q = query_of(resp.headers['Location'])
        check(resp.headers['Location'].startswith('https://neg.example/cb?'), resp.headers['Location'])
        check(q.get('iss') == DISCOVERY['issuer'] and q.get('state') == 'st8', f'iss and state on errors: {q}')
        return q['error']
    # PKCE downgrade: no challenge, or the plain method.
    check(error_of(raw_authorize(cid, code_challenge=None, code_challenge_method=None)[0]) == 'invalid_request', 'no PKCE')
    check(error_of(raw_authorize(cid, code_challenge_method='plain')[0]) == 'invalid_request', 'plain PKCE')
    check(error_of(raw_authorize(cid, prompt='none')[0]) == 'login_required', 'prompt=none without the OP session')
    check(error_of(raw_authorize(cid, scope='profile')[0]) == 'invalid_scope', 'no openid scope')
    check(error_of(raw_authorize(cid, response_type='token')[0]) == 'unsupported_response_type', 'implicit refused')
    details = json.dumps([{'type': 'account_information'}])
    check(error_of(raw_authorize(cid, authorization_details=details)[0]) == 'invalid_authorization_details', 'type not allowed')
    # Wrong verifier, and redirect_uri mismatch at the token endpoint.
    for bad in ['verifier', 'redirect']:
        r, verifier = raw_authorize(cid)
        request_id = query_of(r.headers['Location'])['request']
        st, body = approve(request_id, BROWSER)
        check(st == 200, f'approve {st} {body}')
        q = query_of(body['redirectTo'])
        check(q['iss'] == DISCOVERY['issuer'] and q['state'] == 'st8', 'iss/state on the code response')
        form = {'grant_type': 'authorization_code', 'code': q['code'], 'redirect_uri': 'https://neg.example/cb', 'code_verifier': verifier}
        if bad == 'verifier':
            form['code_verifier'] = secrets.token_urlsafe(48)
        else:
            form['redirect_uri'] = 'https://neg.example/other'
        t = S.post(DISCOVERY['token_endpoint'], data=form, auth=(cid, secret))
        check(t.status_code == 400 and t.json()['error'] == 'invalid_grant', f'{bad}: {t.status_code} {t.text}')
    # A request is used up by approve: a second approve is 404.
    r, _ = raw_authorize(cid)
    request_id = query_of(r.headers['Location'])['request']
    check(approve(request_id, BROWSER)[0] == 200, 'approve once')
    check(approve(request_id, BROWSER)[0] == 404, 'request single use')
    # Deny → access_denied with state and iss.
    r, _ = raw_authorize(cid)
    request_id = query_of(r.headers['Location'])['request']
    st, body = api('POST', f'/v1/oauth/requests/{request_id}/deny', token=USER_TOKEN)
    q = query_of(body['redirectTo'])
    check(st == 200 and q['error'] == 'access_denied' and q['iss'] == DISCOVERY['issuer'] and q['state'] == 'st8', f'deny {q}')
    # Approve without a session → 401; the mix-up defence: the iss a client sees is always ours.
    r, _ = raw_authorize(cid)
    request_id = query_of(r.headers['Location'])['request']
    check(approve(request_id, None)[0] == 401, 'approve needs a session')


def test_payment_authorization_details_step_up():
    cid, secret = add_client('Bank checkout', '--redirect-uri', 'https://shop.example/cb', '--authorization-details-type', 'payment_initiation')
    details = [{'type': 'payment_initiation', 'instructedAmount': {'currency': 'EUR', 'amount': '42.00'}, 'creditorName': 'Merchant A'}]
    client = OAuth2Session(cid, secret, code_challenge_method='S256')
    verifier = secrets.token_urlsafe(48)
    url, state = client.create_authorization_url(DISCOVERY['authorization_endpoint'], redirect_uri='https://shop.example/cb', scope='openid',
                                                 code_verifier=verifier, authorization_details=json.dumps(details))
    request_id, _ = authorize_to_request(url)
    st, view = api('GET', f'/v1/oauth/requests/{request_id}')
    check(st == 200 and view['client']['name'] == 'Bank checkout' and view['authorizationDetails'] == details, f'view {view}')
    st, body = approve(request_id, USER_TOKEN)
    check(st == 403 and body['code'] == 'step_up_required', f'no step-up: {st} {body}')
    other = step_up(PASSKEY, USER_TOKEN, {'type': 'latchkey.oauth.authorize', 'clientId': cid,
                                          'authorizationDetails': [dict(details[0], creditorName='Merchant B')]})
    st, body = approve(request_id, USER_TOKEN, other)
    check(st == 403 and body['code'] == 'step_up_required', f'step-up for other details: {st} {body}')
    right = step_up(PASSKEY, USER_TOKEN, view['stepUpAction'])
    st, body = approve(request_id, USER_TOKEN, right)
    check(st == 200, f'approve with step-up {st} {body}')
    tok = client.fetch_token(DISCOVERY['token_endpoint'], authorization_response=body['redirectTo'], redirect_uri='https://shop.example/cb',
                             code_verifier=verifier)
    check(tok['authorization_details'] == details, 'details in the token response')
    access = json.loads(base64.urlsafe_b64decode(tok['access_token'].split('.')[1] + '=='))
    check(access['authorization_details'] == details and access['receipt_id'] and access['client_id'] == cid, f'access token {access}')
    st, receipt = api('GET', f'/v1/step-up/receipts/{access["receipt_id"]}', token=USER_TOKEN)
    check(st == 200, f'the receipt exists and verifies offline as today: {st} {receipt}')
    # docs/oidc.md's resource-server check, as written there, accepts this token and returns the receipt.
    import re
    doc = open(os.path.join(os.path.dirname(__file__), '..', '..', 'docs', 'oidc.md'), encoding='utf-8').read()
    block = re.search(r'## 4\. A resource server.*?```python\n(.*?)```', doc, re.S).group(1)
    namespace = {'__name__': 'docs_resource_server'}
    exec(compile(block.replace('https://login.example.com', BASE), 'docs/oidc.md', 'exec'), namespace)
    check(namespace['check_payment'](tok['access_token'], '42.00', 'EUR', 'Merchant A') == access['receipt_id'], 'the docs check accepts it')
    try:
        namespace['check_payment'](tok['access_token'], '43.00', 'EUR', 'Merchant A')
        raise RuntimeError('another amount passed the docs check')
    except AssertionError:
        pass


def test_par():
    cid, secret = add_client('PAR app', '--redirect-uri', 'https://par.example/cb')
    verifier = secrets.token_urlsafe(48)
    r = S.post(DISCOVERY['pushed_authorization_request_endpoint'], auth=(cid, secret), data={
        'response_type': 'code', 'client_id': cid, 'redirect_uri': 'https://par.example/cb', 'scope': 'openid', 'state': 'p1', 'nonce': 'n1',
        'code_challenge': create_s256_code_challenge(verifier), 'code_challenge_method': 'S256'})
    check(r.status_code == 201 and r.json()['request_uri'].startswith('urn:ietf:params:oauth:request_uri:'), f'PAR {r.status_code} {r.text}')
    uri = r.json()['request_uri']
    request_id, _ = authorize_to_request(DISCOVERY['authorization_endpoint'] + '?' + urllib.parse.urlencode({'client_id': cid, 'request_uri': uri}))
    st, body = approve(request_id, BROWSER)
    q = query_of(body['redirectTo'])
    check(q['state'] == 'p1', 'state from the pushed request')
    client = OAuth2Session(cid, secret)
    tok = client.fetch_token(DISCOVERY['token_endpoint'], authorization_response=body['redirectTo'], redirect_uri='https://par.example/cb',
                             code_verifier=verifier)
    decode_id_token(tok['id_token'], cid, 'n1')
    r = S.get(DISCOVERY['authorization_endpoint'], params={'client_id': cid, 'request_uri': uri}, allow_redirects=False)
    check(r.status_code == 400, 'a request_uri is single use')


def test_private_key_jwt_with_jti_replay():
    key = ec_key()
    public = key.as_dict(is_private=False)
    public['kid'] = 'k1'

    server, jwks_url = serve_jwks(public)
    try:
        cid, secret = add_client('JWT app', '--redirect-uri', 'https://jwt.example/cb', '--jwks-uri', jwks_url)
        redirect, verifier, nonce, _ = code_flow(OAuth2Session(cid, None, code_challenge_method='S256'), BROWSER, 'https://jwt.example/cb')
        now = int(time.time())
        assertion = jwt.encode({'alg': 'ES256', 'kid': 'k1'}, {'iss': cid, 'sub': cid, 'aud': DISCOVERY['token_endpoint'], 'jti': secrets.token_hex(8),
                                                              'iat': now, 'exp': now + 120}, key).decode()
        form = {'grant_type': 'authorization_code', 'code': query_of(redirect)['code'], 'redirect_uri': 'https://jwt.example/cb',
                'code_verifier': verifier, 'client_id': cid,
                'client_assertion_type': 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', 'client_assertion': assertion}
        r = S.post(DISCOVERY['token_endpoint'], data=form)
        check(r.status_code == 200, f'private_key_jwt {r.status_code} {r.text}')
        decode_id_token(r.json()['id_token'], cid, nonce)
        again = dict(form, grant_type='refresh_token', refresh_token=r.json()['refresh_token'])
        del again['code']
        r = S.post(DISCOVERY['token_endpoint'], data=again)
        check(r.status_code == 401 and r.json()['error'] == 'invalid_client', f'jti replay refused: {r.status_code} {r.text}')
    finally:
        server.shutdown()


def test_issue32_assertion_aud_is_checked_per_endpoint():
    # SPEC "Client authentication": aud is the issuer, the token endpoint, or the endpoint receiving the assertion.
    key = ec_key()
    public = key.as_dict(is_private=False)
    public['kid'] = 'a1'
    server, jwks_url = serve_jwks(public)
    try:
        cid, _ = add_client('Audience app', '--redirect-uri', 'https://aud.example/cb', '--jwks-uri', jwks_url)

        def post(endpoint, aud, **form):
            now = int(time.time())
            assertion = jwt.encode({'alg': 'ES256', 'kid': 'a1'}, {'iss': cid, 'sub': cid, 'aud': aud, 'jti': secrets.token_hex(8),
                                                                  'iat': now, 'exp': now + 120}, key).decode()
            return S.post(endpoint, data=dict(form, client_assertion_type='urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
                                              client_assertion=assertion))

        revoke, token, par = DISCOVERY['revocation_endpoint'], DISCOVERY['token_endpoint'], DISCOVERY['pushed_authorization_request_endpoint']
        for aud in [revoke, token, DISCOVERY['issuer']]:
            r = post(revoke, aud, token='lkor_unknown')
            check(r.status_code == 200, f'aud {aud} at the revocation endpoint: {r.status_code} {r.text}')
        r = post(revoke, par, token='lkor_unknown')
        check(r.status_code == 401 and r.json()['error'] == 'invalid_client', f'the PAR URL at revoke: {r.status_code} {r.text}')
        for aud in [par, revoke]:
            r = post(token, aud, grant_type='refresh_token', refresh_token='lkor_unknown')
            check(r.status_code == 401 and r.json()['error'] == 'invalid_client', f'aud {aud} at the token endpoint: {r.status_code} {r.text}')
            check(r.headers.get('WWW-Authenticate', '').startswith('Basic'), 'invalid_client carries its challenge')
        r = post(token, token, grant_type='refresh_token', refresh_token='lkor_unknown')
        check(r.status_code == 400 and r.json()['error'] == 'invalid_grant', f'the token URL at the token endpoint: {r.status_code} {r.text}')
    finally:
        server.shutdown()


def test_prompt_login_and_max_age():
    cid, secret = add_client('Strict app', '--redirect-uri', 'https://neg.example/cb')
    browser = BROWSER
    if not browser.signed_in:
        r, _ = raw_authorize(cid)
        browser.sign_in(query_of(r.headers['Location'])['request'])
        time.sleep(1.1)  # auth_time is whole seconds: the next requests must come after the sign-in's second
    for params in [{'prompt': 'login'}, {'max_age': '0'}]:
        r, _ = raw_authorize(cid, **params)
        request_id = query_of(r.headers['Location'])['request']
        view = browser.view(request_id)
        check(view['prompt'] == params.get('prompt') or view['maxAge'] == 0, f'view {view}')
        check(view['signedIn'] is not None, 'the cookie names who is signed in')
        # The cookie's sign-in was before this request: refused, the page signs in again.
        st, body = approve(request_id, browser)
        check(st == 401, f'{params}: an older sign-in is refused: {st} {body}')
        browser.sign_in(request_id)
        st, body = approve(request_id, browser)
        check(st == 200, f'{params}: a sign-in for this request approves: {st} {body}')
        time.sleep(1.1)  # auth_time is whole seconds: the next request must come after this sign-in's second


def test_admin_clients_api():
    global BASE
    # The admin API is not served through the public front (deploy/nginx: /admin/ is internal only).
    r = S.get(BASE + '/admin/v1/clients', headers={'Authorization': 'Bearer ' + os.environ['LATCHKEY_TEST_ADMIN_KEY']})
    check(r.status_code == 403, f'the public front keeps /admin/ off: {r.status_code}')
    public, BASE = BASE, os.environ['LATCHKEY_ADMIN_URL']
    try:
        admin_checks()
    finally:
        BASE = public


def admin_checks():
    key = os.environ['LATCHKEY_TEST_ADMIN_KEY']
    st, body = api('POST', '/admin/v1/clients', {'name': 'API app', 'redirectUris': ['https://api.example/cb']}, token=key)
    check(st == 201 and body['clientSecret'].startswith('lks_'), f'create {st} {body}')
    st, listed = api('GET', '/admin/v1/clients', token=key)
    check(any(c['id'] == body['id'] for c in listed['clients']) and all('clientSecret' not in c for c in listed['clients']), 'list hides secrets')
    st, _ = api('POST', '/admin/v1/clients', {'name': 'Bad', 'redirectUris': ['http://evil.example/cb']}, token=key)
    check(st == 400, 'plain http redirect refused')
    st, patched = api('PATCH', f'/admin/v1/clients/{body["id"]}', {'redirectUris': ['https://api.example/cb', 'https://api.example/2']}, token=key)
    check(st == 200 and len(patched['redirectUris']) == 2, f'patch {st}')
    # A user token (even a passkey session) is not an admin.
    st, _ = api('POST', '/admin/v1/clients', {'name': 'x', 'redirectUris': ['https://x.example/cb']}, token=USER_TOKEN)
    check(st == 403, f'a user token cannot add clients: {st}')
    st, _ = api('DELETE', f'/admin/v1/clients/{body["id"]}', token=key)
    check(st == 204, 'delete')
    # Every approval and refusal is audited, the client changes too; /metrics counts per client.
    for action in ['oauth.authorized', 'oauth.denied', 'oauth.token_issued', 'oauth.code_replayed', 'client.added', 'client.removed']:
        st, audit = api('GET', f'/admin/v1/audit?action={action}&limit=5', token=key)
        check(st == 200 and audit['entries'], f'audit {action}: {st} {audit}')
    st, authorized = api('GET', '/admin/v1/audit?action=oauth.authorized&limit=50', token=key)
    check(any(e['detail'].get('receiptId') for e in authorized['entries']), 'the payment approval names its receipt')
    metrics = S.get(BASE + '/metrics').text
    check('latchkey_oauth_total{client="lkc_' in metrics and 'outcome="authorized"' in metrics and 'outcome="code_replayed"' in metrics,
          'per-client metrics')


WEBHOOKS = []


def subscribe_webhooks():
    """A receiver on loopback (dev mode allows http there) subscribed to oauth.authorized / oauth.denied."""
    class H(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            WEBHOOKS.append(json.loads(self.rfile.read(int(self.headers['Content-Length']))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *a):
            pass
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    r = requests.post(os.environ['LATCHKEY_ADMIN_URL'] + '/admin/v1/webhooks', timeout=20,
                      headers={'Authorization': 'Bearer ' + os.environ['LATCHKEY_TEST_ADMIN_KEY']},
                      json={'url': f'http://127.0.0.1:{server.server_port}/hook', 'events': ['oauth.authorized', 'oauth.denied']})
    check(r.status_code == 201, f'webhook subscription: {r.status_code} {r.text}')


def test_webhook_events():
    """oauth.authorized / oauth.denied reach a subscribed endpoint through the outbox, with {userId,clientId,scopes,receiptId}."""
    deadline = time.monotonic() + 30  # a bound on delivery, not an assertion on time
    while time.monotonic() < deadline and not ({'oauth.authorized', 'oauth.denied'} <= {w['type'] for w in WEBHOOKS}
                                               and any(w['data'].get('receiptId') for w in WEBHOOKS)):
        time.sleep(0.2)
    types = {w['type'] for w in WEBHOOKS}
    check({'oauth.authorized', 'oauth.denied'} <= types, f'delivered types {types}')
    for w in WEBHOOKS:
        check(set(w['data']) == {'userId', 'clientId', 'scopes', 'receiptId'}, f'data {w["data"]}')
        check(len(w['data']['userId']) == 22 and w['data']['clientId'].startswith('lkc_'), f'data {w["data"]}')
    check(any(w['data']['userId'] == USER_ID for w in WEBHOOKS), 'the main user\'s approvals are reported')
    check(any(w['data']['receiptId'] for w in WEBHOOKS if w['type'] == 'oauth.authorized'), 'the payment approval carries its receiptId')


# ---- DPoP (RFC 9449): proofs made with `cryptography`, tokens Authlib's OAuth2Session fetched ------

class DPoPKey:
    """An ES256 DPoP key and its proofs (RFC 9449 §4.2), written from the RFC with `cryptography`."""
    def __init__(self):
        from cryptography.hazmat.primitives.asymmetric import ec
        self.key = ec.generate_private_key(ec.SECP256R1())
        n = self.key.public_key().public_numbers()
        self.jwk = {'kty': 'EC', 'crv': 'P-256', 'x': b64u(n.x.to_bytes(32, 'big')), 'y': b64u(n.y.to_bytes(32, 'big'))}
        canonical = json.dumps({k: self.jwk[k] for k in ('crv', 'kty', 'x', 'y')}, separators=(',', ':'), sort_keys=True)
        self.jkt = b64u(hashlib.sha256(canonical.encode()).digest())

    def proof(self, method, url, access_token=None, nonce=None, iat=None):
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec, utils
        header = {'typ': 'dpop+jwt', 'alg': 'ES256', 'jwk': self.jwk}
        claims = {'jti': secrets.token_urlsafe(16), 'htm': method, 'htu': url, 'iat': int(iat if iat is not None else time.time())}
        if access_token:
            claims['ath'] = b64u(hashlib.sha256(access_token.encode()).digest())
        if nonce:
            claims['nonce'] = nonce
        signing_input = b64u(json.dumps(header).encode()) + '.' + b64u(json.dumps(claims).encode())
        r, s = utils.decode_dss_signature(self.key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        return signing_input + '.' + b64u(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))


def test_dpop_stolen_access_and_refresh_tokens_are_refused_without_the_key():
    check(DISCOVERY.get('dpop_signing_alg_values_supported') == ['ES256', 'EdDSA', 'RS256', 'PS256'], 'discovery lists the DPoP algs')
    cid, _ = add_client('DPoP native app', '--public', '--redirect-uri', 'http://127.0.0.1/callback', '--dpop', 'required')
    key, thief = DPoPKey(), DPoPKey()
    token_url, userinfo_url = DISCOVERY['token_endpoint'], DISCOVERY['userinfo_endpoint']
    client = OAuth2Session(cid, None, token_endpoint_auth_method='none', code_challenge_method='S256')
    redirect, verifier, nonce, _ = code_flow(client, BROWSER, 'http://127.0.0.1:53128/callback', scope='openid offline_access')
    code = query_of(redirect)['code']
    r = S.post(token_url, data={'grant_type': 'authorization_code', 'code': code, 'redirect_uri': 'http://127.0.0.1:53128/callback',
                                'code_verifier': verifier, 'client_id': cid}, headers={'DPoP': key.proof('POST', token_url)})
    check(r.status_code == 200 and r.json()['token_type'] == 'DPoP', f'DPoP token response: {r.status_code} {r.text}')
    check(len(r.headers.get('DPoP-Nonce', '')) == 22, f'DPoP-Nonce {r.headers}')
    tok = r.json()
    claims = json.loads(base64.urlsafe_b64decode(tok['access_token'].split('.')[1] + '=='))
    check(claims['cnf'] == {'jkt': key.jkt}, f'cnf {claims.get("cnf")}')
    # Authlib's own session, holding the stolen token, presents it as Bearer: refused.
    stolen = OAuth2Session(cid, None, token={'access_token': tok['access_token'], 'token_type': 'Bearer'})
    r = stolen.get(userinfo_url)
    check(r.status_code == 401 and r.headers['WWW-Authenticate'].startswith('DPoP error="invalid_token"'), f'as Bearer: {r.status_code} {r.headers}')
    for who, proof in [('no proof', None),
                       ("the thief's key", thief.proof('GET', userinfo_url, tok['access_token'])),
                       ('an ath of another token', key.proof('GET', userinfo_url, 'another token')),
                       ('another htu', key.proof('GET', BASE + '/oauth2/elsewhere', tok['access_token'])),
                       ('an old iat', key.proof('GET', userinfo_url, tok['access_token'], iat=time.time() - 300))]:
        h = {'Authorization': 'DPoP ' + tok['access_token']}
        if proof:
            h['DPoP'] = proof
        r = S.get(userinfo_url, headers=h)
        check(r.status_code == 401 and r.headers['WWW-Authenticate'].startswith('DPoP '), f'{who}: {r.status_code} {r.headers}')
    proof = key.proof('GET', userinfo_url, tok['access_token'])
    r = S.get(userinfo_url, headers={'Authorization': 'DPoP ' + tok['access_token'], 'DPoP': proof})
    check(r.status_code == 200 and r.json()['sub'] == USER_ID, f'the key holder: {r.status_code} {r.text}')
    r = S.get(userinfo_url, headers={'Authorization': 'DPoP ' + tok['access_token'], 'DPoP': proof})
    check(r.status_code == 401 and 'invalid_dpop_proof' in r.headers['WWW-Authenticate'], f'replayed proof: {r.status_code}')
    # The stolen refresh token: Authlib refreshing without a proof, then with the thief's key.
    try:
        stolen.refresh_token(token_url, refresh_token=tok['refresh_token'])
        check(False, 'a refresh without the key was answered')
    except AssertionError:
        raise
    except Exception as e:
        check('invalid_dpop_proof' in str(e), f'refresh without a proof (the client is --dpop required): {e}')
    r = S.post(token_url, data={'grant_type': 'refresh_token', 'refresh_token': tok['refresh_token'], 'client_id': cid},
               headers={'DPoP': thief.proof('POST', token_url)})
    check(r.status_code == 400 and r.json()['error'] == 'invalid_grant', f"refresh with the thief's key: {r.status_code} {r.text}")
    r = S.post(token_url, data={'grant_type': 'refresh_token', 'refresh_token': tok['refresh_token'], 'client_id': cid},
               headers={'DPoP': 'not.a.proof'})
    check(r.status_code == 400 and r.json()['error'] == 'invalid_dpop_proof', f'a malformed proof: {r.status_code} {r.text}')
    r = S.post(token_url, data={'grant_type': 'refresh_token', 'refresh_token': tok['refresh_token'], 'client_id': cid},
               headers={'DPoP': key.proof('POST', token_url)})
    check(r.status_code == 200 and r.json()['token_type'] == 'DPoP', f'the key holder refreshes: {r.status_code} {r.text}')


# ---- FAPI 2.0 Security Profile (a --profile fapi2 client): Authlib's private_key_jwt, DPoP with nonces ----

def test_fapi2_par_private_key_jwt_dpop_nonce_refresh_without_rotation():
    key = ec_key()
    public = key.as_dict(is_private=False)
    server, jwks_url = serve_jwks(public)
    try:
        cid, secret = add_client('FAPI bank', '--redirect-uri', 'https://bank.example/cb', '--jwks-uri', jwks_url, '--profile', 'fapi2')
        check(secret is None, 'a fapi2 client has no secret (private_key_jwt)')
        for refused in (['--public'], ['--jwks-uri', jwks_url, '--id-token-alg', 'RS256']):
            r = subprocess.run([BIN, 'clients', 'add', 'Bad bank', '--redirect-uri', 'https://bank.example/cb', '--profile', 'fapi2', *refused],
                               capture_output=True, text=True)
            check(r.returncode == 64, f'--profile fapi2 with {refused}: exit {r.returncode} {r.stderr}')
        issuer, par_url = DISCOVERY['issuer'], DISCOVERY['pushed_authorization_request_endpoint']
        token_url, userinfo_url = DISCOVERY['token_endpoint'], DISCOVERY['userinfo_endpoint']
        nonce = {}

        def remember(r, *args, **kwargs):
            if 'DPoP-Nonce' in r.headers:
                nonce['value'] = r.headers['DPoP-Nonce']

        def assertion():
            # SPEC "FAPI 2.0": ES256, aud exactly the issuer, as a string.
            now = int(time.time())
            return jwt.encode({'alg': 'ES256'}, {'iss': cid, 'sub': cid, 'aud': issuer, 'jti': secrets.token_hex(8),
                                                 'iat': now, 'exp': now + 60}, key).decode()

        dpop, thief = DPoPKey(), DPoPKey()
        verifier = secrets.token_urlsafe(48)
        pushed = {'response_type': 'code', 'client_id': cid, 'redirect_uri': 'https://bank.example/cb', 'scope': 'openid offline_access',
                  'state': 'f1', 'nonce': 'n-fapi', 'code_challenge': create_s256_code_challenge(verifier), 'code_challenge_method': 'S256',
                  'client_assertion_type': 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer'}
        # PAR: the first proof carries no nonce and is told to use one; the retry carries it.
        r = S.post(par_url, data=dict(pushed, client_assertion=assertion()), headers={'DPoP': dpop.proof('POST', par_url)})
        check(r.status_code == 400 and r.json()['error'] == 'use_dpop_nonce' and r.headers.get('DPoP-Nonce'), f'PAR without a nonce: {r.status_code} {r.text}')
        r = S.post(par_url, data=dict(pushed, client_assertion=assertion()),
                   headers={'DPoP': dpop.proof('POST', par_url, nonce=r.headers['DPoP-Nonce'])})
        check(r.status_code == 201 and r.json()['expires_in'] == 90, f'PAR with the nonce: {r.status_code} {r.text}')
        uri = r.json()['request_uri']
        # The front channel without request_uri is refused, with iss.
        r = S.get(DISCOVERY['authorization_endpoint'], params={k: v for k, v in pushed.items() if not k.startswith('client_assertion')},
                  allow_redirects=False)
        q = query_of(r.headers.get('Location', ''))
        check(r.status_code == 303 and q.get('error') == 'invalid_request' and q.get('iss') == issuer, f'without PAR: {r.status_code} {q}')
        request_id, _ = authorize_to_request(DISCOVERY['authorization_endpoint'] + '?' + urllib.parse.urlencode({'client_id': cid, 'request_uri': uri}))
        st, body = approve(request_id, BROWSER)
        check(st == 200, f'approve: {st} {body}')
        check(query_of(body['redirectTo']).get('iss') == issuer, 'iss in the authorization response')
        # Authlib's OAuth2Session fetches the token: its private_key_jwt addressed to the issuer, a DPoP
        # proof with the nonce it was last given (and once more with a fresh one, should it have gone stale).
        S.hooks['response'].append(remember)
        try:
            def fetch():
                # A session per attempt: Authlib's PrivateKeyJWT keeps the claims it was given (the jti too).
                # Authlib's PrivateKeyJWT signs with a joserfc key (an authlib.jose key would be read as RSA).
                client = OAuth2Session(cid, JoseECKey.import_key(key.as_dict(is_private=True)), code_challenge_method='S256',
                                       token_endpoint_auth_method=PrivateKeyJWT(issuer, alg='ES256', claims={'exp': int(time.time()) + 60}))
                client.hooks['response'].append(remember)
                return client.fetch_token(token_url, authorization_response=body['redirectTo'], redirect_uri='https://bank.example/cb',
                                          code_verifier=verifier, headers={'DPoP': dpop.proof('POST', token_url, nonce=nonce.get('value'))})
            try:
                tok = fetch()
            except Exception as e:
                check('use_dpop_nonce' in str(e), f'token: {e}')
                tok = fetch()
            check(tok['token_type'] == 'DPoP' and tok.get('refresh_token'), f'tokens: {tok}')
            decode_id_token(tok['id_token'], cid, 'n-fapi')
            at = tok['access_token']
            r = S.get(userinfo_url, headers={'Authorization': 'DPoP ' + at, 'DPoP': dpop.proof('GET', userinfo_url, at)})
            check(r.status_code == 200 and r.json()['sub'] == USER_ID, f'userinfo with DPoP: {r.status_code} {r.text}')
            # Refreshes that do not rotate: no refresh_token in the answer; the same token works again.
            for _ in range(2):
                form = {'grant_type': 'refresh_token', 'refresh_token': tok['refresh_token'],
                        'client_assertion_type': 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer'}
                for attempt in range(2):
                    r = S.post(token_url, data=dict(form, client_assertion=assertion()),
                               headers={'DPoP': dpop.proof('POST', token_url, nonce=nonce.get('value'))})
                    if r.status_code != 400 or r.json().get('error') != 'use_dpop_nonce':
                        break
                check(r.status_code == 200 and 'refresh_token' not in r.json() and r.json()['token_type'] == 'DPoP',
                      f'refresh without rotation: {r.status_code} {r.text}')
            # The stolen refresh token, without the client's key (its own DPoP key, no assertion): invalid_client.
            r = S.post(token_url, data={'grant_type': 'refresh_token', 'refresh_token': tok['refresh_token'], 'client_id': cid},
                       headers={'DPoP': thief.proof('POST', token_url, nonce=nonce.get('value'))})
            check(r.status_code == 401 and r.json()['error'] == 'invalid_client', f'the stolen refresh token: {r.status_code} {r.text}')
        finally:
            S.hooks['response'].remove(remember)
    finally:
        server.shutdown()


def main():
    global DISCOVERY, PASSKEY, USER_TOKEN, USER_ID, USERNAME, BROWSER
    DISCOVERY = S.get(BASE + '/.well-known/openid-configuration', timeout=20).json()
    subscribe_webhooks()
    USERNAME = 'oidc-' + secrets.token_hex(3)
    PASSKEY, USER_TOKEN, USER_ID = sign_up(USERNAME)
    BROWSER = OPBrowser(PASSKEY)
    tests = [v for k, v in globals().items() if k.startswith('test_') and callable(v)]
    for t in tests:
        # Each test is a browser of its own address: SPEC's per-address limits are per minute, and
        # the suite's tests, all from 127.0.0.1, would add up against them.
        source_address.fresh()
        for session in (S, BROWSER.s):
            session.close()
        try:
            t()
            RESULTS.append((t.__name__, True))
            print(f'ok   {t.__name__}', flush=True)
        except Exception:
            RESULTS.append((t.__name__, False))
            print(f'FAIL {t.__name__}\n{traceback.format_exc()}', flush=True)
    passed = sum(1 for _, ok in RESULTS if ok)
    print(f'{passed} passed, {len(RESULTS) - passed} failed')
    return 0 if passed == len(RESULTS) else 1


if __name__ == '__main__':
    sys.exit(main())
