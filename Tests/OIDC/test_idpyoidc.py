#!/usr/bin/env python3
"""idpyoidc (the Identity Python OpenID Connect library, from PyPI) as a relying party against
Latchkey through the https front: discovery checked as the standard says (https issuer, RS256
listed, subject_types_supported), the code flow with PKCE S256, userinfo, refresh and logout.
Run by Tests/OIDC/run.sh. Prints one line per test and closes with 'N passed, N failed'.
"""
import os
import secrets
import subprocess
import sys
import tempfile
import traceback
import urllib.parse

import requests
from idpyoidc.client.rp_handler import RPHandler

import source_address
from softauthn import SoftPasskey

BASE = os.environ['LATCHKEY_URL'].rstrip('/')
BIN = os.environ['LATCHKEY_BIN']
CA = os.environ['REQUESTS_CA_BUNDLE']
RP_BASE = 'https://idpy.example'
REDIRECT = RP_BASE + '/authz_cb'
S = requests.Session()


def sign_up():
    pk = SoftPasskey('localhost', BASE)
    username = 'idpy-' + secrets.token_hex(3)
    options = S.post(BASE + '/v1/passkeys/registration/options', json={'username': username, 'displayName': 'Idpy User'}).json()
    done = S.post(BASE + '/v1/passkeys/registration/verify', json=pk.create(options)).json()
    return pk, done['user']['id'], username


def approve_in_browser(url, pk):
    """What the person does on Latchkey's page: the 303 to /authorize, a passkey sign-in there (the OP
    session cookie, sent as the page's same-origin fetch sends it), then approve."""
    r = S.get(url, allow_redirects=False)
    assert r.status_code == 303, (r.status_code, r.text[:300])
    request_id = urllib.parse.parse_qs(urllib.parse.urlparse(r.headers['Location']).query)['request'][0]
    page = {'Origin': '{0.scheme}://{0.netloc}'.format(urllib.parse.urlparse(BASE)), 'Sec-Fetch-Site': 'same-origin'}
    view = S.get(f'{BASE}/v1/oauth/requests/{request_id}', headers={'Sec-Fetch-Site': 'same-origin'}).json()
    r = S.post(f'{BASE}/v1/oauth/requests/{request_id}/sign-in', json=pk.get(view['publicKey']), headers=page)
    assert r.status_code == 200, (r.status_code, r.text)
    r = S.post(f'{BASE}/v1/oauth/requests/{request_id}/approve', json={}, headers=page)
    assert r.status_code == 200, (r.status_code, r.text)
    return dict(urllib.parse.parse_qsl(urllib.parse.urlparse(r.json()['redirectTo']).query))


def main():
    # idpyoidc writes its RP keys to ./static/ and ./private/: keep them out of the work tree.
    os.chdir(tempfile.mkdtemp(prefix='idpyoidc-'))
    # A browser of its own address (Tests/OIDC/source_address.py), not test_oidc.py's.
    source_address.fresh()
    S.close()
    out = subprocess.run([BIN, 'clients', 'add', 'idpyoidc RP', '--redirect-uri', REDIRECT, '--post-logout-redirect-uri', RP_BASE + '/bye'],
                         capture_output=True, text=True, check=True).stdout
    fields = dict(line.split(': ', 1) for line in out.strip().splitlines())
    config = {
        'latchkey': {
            'issuer': BASE,
            'client_id': fields['client_id'],
            'client_secret': fields['client_secret'],
            'redirect_uris': [REDIRECT],
            'post_logout_redirect_uris': [RP_BASE + '/bye'],
            'client_type': 'oidc',
            'client_authn_methods': ['client_secret_basic'],
            'preference': {'response_types_supported': ['code'], 'token_endpoint_auth_methods_supported': ['client_secret_basic'],
                           'scopes_supported': ['openid', 'profile', 'offline_access']},
            'add_ons': {'pkce': {'function': 'idpyoidc.client.oauth2.add_on.pkce.add_support',
                                 'kwargs': {'code_challenge_length': 64, 'code_challenge_method': 'S256'}}},
            'services': {
                'discovery': {'class': 'idpyoidc.client.oidc.provider_info_discovery.ProviderInfoDiscovery'},
                'authorization': {'class': 'idpyoidc.client.oidc.authorization.Authorization'},
                'access_token': {'class': 'idpyoidc.client.oidc.access_token.AccessToken'},
                'refresh_access_token': {'class': 'idpyoidc.client.oidc.refresh_access_token.RefreshAccessToken'},
                'userinfo': {'class': 'idpyoidc.client.oidc.userinfo.UserInfo'},
                'end_session': {'class': 'idpyoidc.client.oidc.end_session.EndSession'},
            },
        }
    }
    results = []

    def run(name, fn):
        try:
            fn()
            results.append(True)
            print(f'ok   {name}', flush=True)
        except Exception:
            results.append(False)
            print(f'FAIL {name}\n{traceback.format_exc()}', flush=True)

    pk, user_id, username = sign_up()
    rph = RPHandler(base_url=RP_BASE, client_configs=config, httpc_params={'verify': CA})
    state = {}

    def code_flow():
        # begin() fetches and verifies the discovery document (https issuer, RS256, subject types).
        begun = rph.begin('latchkey', req_args={'scope': ['openid', 'profile', 'offline_access']})
        url = begun if isinstance(begun, str) else begun['url']
        assert 'code_challenge_method=S256' in url, url
        response = approve_in_browser(url, pk)
        assert response['iss'] == BASE, response
        result = rph.finalize(BASE, response)
        assert 'error' not in result, result
        assert result['id_token']['sub'] == user_id, result
        assert result['userinfo']['preferred_username'] == username, result['userinfo']
        state['key'] = result['state']

    def refresh():
        tokens = rph.refresh_access_token(state['key'])
        assert tokens.get('access_token') and tokens.get('refresh_token'), tokens

    def logout():
        request = rph.logout(state['key'], post_logout_redirect_uri=RP_BASE + '/bye')
        url = request['url'] if isinstance(request, dict) else request
        r = S.get(url, allow_redirects=False)
        assert r.status_code == 303 and r.headers['Location'].startswith(RP_BASE + '/bye'), (r.status_code, r.headers, r.text[:200])

    run('idpyoidc_code_flow_userinfo', code_flow)
    run('idpyoidc_refresh', refresh)
    run('idpyoidc_logout', logout)
    passed = sum(results)
    print(f'{passed} passed, {len(results) - passed} failed')
    return 0 if passed == len(results) else 1


if __name__ == '__main__':
    sys.exit(main())
