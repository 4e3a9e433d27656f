// The OpenID Provider's page (SPEC "OpenID Provider"): /authorize?request=<id>. Reads the stored
// request, signs the person in with a passkey (conditional UI first; the session of this tab is
// reused when prompt and max_age allow), shows what the app asks in plain words, and approves
// (with the action-bound passkey step-up for authorization_details) or denies, then goes back to
// the app. State for tests and assistive technology is on <body data-state>.
import { credentialToJSON as credentialJSON, parseRequestOptions as requestOptions } from './latchkey.js';

const SESSION_KEY = 'latchkey.session';
const $ = (id) => document.getElementById(id);
const page = { id: null, view: null, session: null, conditional: null };

function setState(state) { document.body.dataset.state = state; }
function announce(text) { $('status').textContent = ''; requestAnimationFrame(() => { $('status').textContent = text; }); }
function showError(text) {
  $('banner-text').textContent = text;
  $('banner').hidden = false;
}

async function api(method, path, { body, token, headers = {} } = {}) {
  const h = { Accept: 'application/json, application/problem+json', ...headers };
  if (body !== undefined) h['Content-Type'] = 'application/json';
  if (token) h.Authorization = `Bearer ${token}`;
  const r = await fetch(path, { method, headers: h, cache: 'no-store', body: body === undefined ? undefined : JSON.stringify(body) });
  let json = null;
  try { json = await r.json(); } catch { json = null; }
  if (!r.ok) { const e = new Error((json && json.detail) || `HTTP ${r.status}`); e.status = r.status; e.code = json && json.code; throw e; }
  return json;
}

function claims(token) {
  try { return JSON.parse(atob(token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/'))); } catch { return {}; }
}

/** The tab's session, when prompt and max_age let it stand for this request. */
function usableSession() {
  let s = null;
  try { s = JSON.parse(sessionStorage.getItem(SESSION_KEY) || 'null'); } catch { s = null; }
  if (!s || !s.tokens || !s.tokens.access_token) return null;
  const v = page.view;
  const c = claims(s.tokens.access_token);
  if ((v.prompt || '').split(' ').includes('login') || v.maxAge === 0) return null;
  if (typeof v.maxAge === 'number' && Date.now() / 1000 - (c.auth_time || 0) > v.maxAge) return null;
  if ((c.exp || 0) < Date.now() / 1000 + 5) return null;
  return s;
}

/** "Pay €42.00 to Merchant A" for a payment; otherwise the entry's members in words. */
function describeDetail(d) {
  const amount = d.instructedAmount || d.amount;
  if (amount && typeof amount === 'object' && amount.amount !== undefined) {
    let money = `${amount.amount} ${amount.currency || ''}`.trim();
    try { money = new Intl.NumberFormat('en-GB', { style: 'currency', currency: amount.currency }).format(Number(amount.amount)); } catch { /* keep */ }
    const to = d.creditorName || (d.creditorAccount && (d.creditorAccount.iban || d.creditorAccount.name)) || 'the payee';
    return `Pay ${money} to ${to}`;
  }
  const parts = Object.entries(d).filter(([k]) => k !== 'type').map(([k, v]) => `${k}: ${typeof v === 'object' ? JSON.stringify(v) : v}`);
  return `${d.type}${parts.length ? ' — ' + parts.join(', ') : ''}`;
}

function render() {
  const v = page.view;
  $('client-name').textContent = v.client.name;
  const scopes = $('scopes');
  scopes.replaceChildren(...v.scopeDescriptions.map((t) => { const li = document.createElement('li'); li.textContent = t; return li; }));
  if (Array.isArray(v.authorizationDetails)) {
    $('details').replaceChildren(...v.authorizationDetails.map((d) => {
      const li = document.createElement('li'); li.textContent = describeDetail(d); li.className = 'detail'; return li;
    }));
    $('details-block').hidden = false;
  }
  $('request').hidden = false;
}

function showConsent() {
  $('signin').hidden = true;
  $('who').textContent = (page.session.user && page.session.user.username) || 'you';
  $('consent').hidden = false;
  setState('consent');
  $('approve').focus();
}

async function finishSignIn(credential) {
  const result = await api('POST', '/v1/passkeys/authentication/verify', { body: credentialJSON(credential) });
  page.session = { user: result.user, tokens: result.tokens };
  try { sessionStorage.setItem(SESSION_KEY, JSON.stringify(page.session)); } catch { /* memory only */ }
  announce(`Signed in as ${result.user.username}`);
  showConsent();
}

async function startConditional() {
  if (!window.PublicKeyCredential || !PublicKeyCredential.isConditionalMediationAvailable) return;
  if (!(await PublicKeyCredential.isConditionalMediationAvailable())) return;
  const controller = new AbortController();
  page.conditional = controller;
  try {
    const options = await api('POST', '/v1/passkeys/authentication/options', { body: {} });
    const credential = await navigator.credentials.get({ mediation: 'conditional', publicKey: requestOptions(options), signal: controller.signal });
    if (credential && page.conditional === controller) { page.conditional = null; await finishSignIn(credential); }
  } catch (e) {
    if (page.conditional === controller && e.name !== 'AbortError') showError(e.message);
  }
}

async function signInWithButton(event) {
  event.preventDefault();
  if (page.conditional) { page.conditional.abort(); page.conditional = null; }
  setState('signing-in');
  try {
    const username = $('signin-username').value.trim();
    const options = await api('POST', '/v1/passkeys/authentication/options', { body: username ? { username } : {} });
    const credential = await navigator.credentials.get({ publicKey: requestOptions(options) });
    await finishSignIn(credential);
  } catch (e) {
    setState('signin');
    showError(e.name === 'NotAllowedError' ? 'The passkey sign-in was cancelled. Try again.' : e.message);
  }
}

async function stepUp() {
  const action = page.view.stepUpAction;
  const token = page.session.tokens.access_token;
  const challenge = await api('POST', '/v1/step-up/challenges', { token, body: { method: 'passkey', action } });
  const credential = await navigator.credentials.get({ publicKey: requestOptions(challenge.publicKey) });
  const approval = await api('POST', '/v1/step-up/verify', { token, body: { challengeId: challenge.challengeId, credential: credentialJSON(credential) } });
  return approval.access_token;
}

async function decide(approve) {
  $('approve').disabled = $('deny').disabled = true;
  setState(approve ? 'approving' : 'denying');
  try {
    const token = page.session.tokens.access_token;
    let headers = {};
    if (approve && Array.isArray(page.view.authorizationDetails)) {
      setState('step-up');
      headers = { 'Latchkey-Step-Up': await stepUp() };
    }
    const result = await api('POST', `/v1/oauth/requests/${encodeURIComponent(page.id)}/${approve ? 'approve' : 'deny'}`, { token, headers });
    setState('redirecting');
    window.location.assign(result.redirectTo);
  } catch (e) {
    $('approve').disabled = $('deny').disabled = false;
    if (e.status === 401) {
      // The session is too old for this request (max_age, prompt=login) or has ended: sign in again.
      page.session = null;
      $('consent').hidden = true;
      $('signin').hidden = false;
      setState('signin');
      showError('Sign in with your passkey again to continue.');
      return;
    }
    setState('consent');
    showError(e.name === 'NotAllowedError' ? 'The passkey approval was cancelled.' : e.message);
  }
}

async function main() {
  page.id = new URLSearchParams(location.search).get('request');
  $('signin').addEventListener('submit', signInWithButton);
  $('approve').addEventListener('click', () => decide(true));
  $('deny').addEventListener('click', () => decide(false));
  try {
    page.view = await api('GET', `/v1/oauth/requests/${encodeURIComponent(page.id || '')}`);
  } catch (e) {
    setState('error');
    showError('This sign-in request is unknown, expired or already used. Go back to the app and try again.');
    return;
  }
  render();
  page.session = usableSession();
  if (page.session) { showConsent(); return; }
  if (page.view.loginHint) $('signin-username').value = page.view.loginHint;
  $('signin').hidden = false;
  setState('signin');
  $('request-title').focus();
  startConditional();
}

main();
