// The OpenID Provider's page (docs/oidc.md: who may approve and the `/authorize`
// page"): /authorize?request=<id>[&lang=<tag>]. It reads the stored request as the server words it
// (`display.lines`: what the page shows is what a step-up approves, so nothing is worded here),
// signs the person in with a passkey into the OP session cookie (conditional UI first, then a
// button), and approves — with the action-bound passkey step-up when the server names one — or
// denies, then goes back to the app. The cookie is the only credential: no token is kept in the
// page or in storage. State for tests and assistive technology is on <body data-state>: loading,
// signin, signing-in, consent, step-up, approving, denying, redirecting, error.
import { LatchkeyError, ceremonyError, credentialToJSON, parseRequestOptions } from './latchkey.js';
import * as i18n from './i18n.js';

const { t } = i18n;
/** Marks a catalog key that is looked up later (Tests/Browser/i18n_keys.py collects it). */
const N_ = (text) => text;
const $ = (id) => document.getElementById(id);
const page = { id: '', view: null, conditional: null };

// Every failure in a sentence of the page's language; a browser's or server's own text never shows.
const SERVER_MESSAGES = {
  // A held passkey: added by a recovery, an email sign-in or a ticket, it approves nothing until its hold ends.
  recovery_pending: N_('This passkey was added recently and is on hold, so it cannot sign in to apps or approve anything yet. Use another passkey.'),
  forbidden: N_('This sign-in may not approve this request. Sign in with a passkey of the account and try again.'),
  not_found: N_('This sign-in request is unknown, expired or already used. Go back to the app and try again.'),
  step_up_required: N_('This needs a fresh approval with your passkey.'),
  challenge_invalid: N_('The approval expired or was already used. Nothing was sent — please approve again.'),
  rate_limited: N_('Too many attempts. Please wait a moment and try again.'),
  internal_error: N_('Something went wrong on our side. Please try again in a moment.'),
  network: N_('Cannot reach the server. Check your connection and try again.'),
};
const UNAUTHORIZED = {
  signin: N_('That passkey could not sign you in. Try again, or use another passkey.'),
  approve: N_('Sign in with your passkey again to continue.'),
};
const BROWSER_MESSAGES = {
  signin: {
    cancelled: N_('Sign-in was cancelled. Press “Sign in with a passkey” to try again.'),
    timeout: N_('The passkey prompt timed out. Press “Sign in with a passkey” to try again.'),
  },
  approve: {
    cancelled: N_('The approval was cancelled. Nothing was approved: approve again, or deny.'),
    timeout: N_('The passkey prompt timed out. Nothing was approved: approve again, or deny.'),
  },
  aborted: N_('The passkey prompt was stopped before it finished. Please try again.'),
  invalid_state: N_('This passkey cannot be used for this. Try again, or use another passkey.'),
  security: N_('This page’s address cannot use passkeys for this site. Open it from its usual address.'),
  not_supported: N_('Your device does not support the kind of passkey this site needs.'),
  unknown: N_('The passkey prompt failed. Please try again.'),
};

/** One translated sentence for a failure while signing in ('signin') or deciding ('approve'). */
function describe(error, context) {
  const e = error instanceof LatchkeyError ? error : new LatchkeyError('unknown', String(error));
  if (e.status > 0 || e.code === 'network') {
    if (e.code === 'unauthorized') return t(UNAUTHORIZED[context]);
    if (e.code === 'rate_limited' && e.retryAfter) {
      return t('Too many attempts. Please wait {seconds} seconds and try again.', { seconds: i18n.number(e.retryAfter) });
    }
    const known = SERVER_MESSAGES[e.code];
    return known ? t(known) : t('The server refused the request ({code}).', { code: e.code });
  }
  // A get() that throws InvalidStateError is 'unknown' to ceremonyError (it only means something for create()).
  const code = e.cause && e.cause.name === 'InvalidStateError' ? 'invalid_state' : e.code;
  const own = BROWSER_MESSAGES[context][code] || BROWSER_MESSAGES[code];
  return t(typeof own === 'string' ? own : BROWSER_MESSAGES.unknown);
}

function setState(state) { document.body.dataset.state = state; }
function announce(text) { $('status').textContent = ''; requestAnimationFrame(() => { $('status').textContent = text; }); }
function showError(text) { $('banner-text').textContent = text; $('banner').hidden = false; }
function clearError() { $('banner').hidden = true; $('banner-text').textContent = ''; }

/** A JSON call with the OP session cookie (same-origin only: these routes answer no CORS). */
async function api(method, path, { body, headers = {} } = {}) {
  const h = { Accept: 'application/json, application/problem+json', ...headers };
  if (method !== 'GET') h['Content-Type'] = 'application/json';
  let r;
  try {
    r = await fetch(path, { method, headers: h, credentials: 'same-origin', cache: 'no-store',
      body: method === 'GET' ? undefined : JSON.stringify(body === undefined ? {} : body) });
  } catch (cause) {
    throw new LatchkeyError('network', 'no answer', { cause });
  }
  let json = null;
  try { json = await r.json(); } catch { json = null; }
  if (!r.ok) {
    const code = (json && typeof json.code === 'string' && json.code) || `http_${r.status}`;
    throw new LatchkeyError(code, `HTTP ${r.status}`, { status: r.status, problem: json, retryAfter: Number(r.headers.get('Retry-After')) || null });
  }
  return json;
}

const requestPath = (action) => `/v1/oauth/requests/${encodeURIComponent(page.id)}${action ? `/${action}` : ''}`;

/** The request as the server words it in `lang` (null: the server picks, from ui_locales, then Accept-Language). */
async function fetchView(lang) {
  return api('GET', requestPath('') + (lang ? `?lang=${encodeURIComponent(lang)}` : ''));
}

/** An assertion for the server's options JSON, as AuthenticationResponseJSON; failures as LatchkeyError. */
async function assertion(optionsJSON, { signal, mediation } = {}) {
  const started = Date.now();
  try {
    const credential = await navigator.credentials.get({ publicKey: parseRequestOptions(optionsJSON),
      ...(signal ? { signal } : {}), ...(mediation ? { mediation } : {}) });
    if (!credential) throw new LatchkeyError('cancelled', 'no passkey');
    return credentialToJSON(credential);
  } catch (e) {
    throw ceremonyError(e, { started, timeout: mediation ? 0 : (optionsJSON.timeout || 0), kind: 'get', rpId: optionsJSON.rpId || '' });
  }
}

// ---------------------------------------------------------------------------------------------
// Showing the request

function render() {
  const v = page.view;
  $('request-title').textContent = t('{app} wants to use your Latchkey account', { app: v.client.name });
  $('client-host').textContent = t('After you decide, you go back to {host}.', { host: v.client.host });
  // The server's lines, as text and in order: they are what the step-up binds.
  $('lines').replaceChildren(...v.display.lines.map((line) => {
    const li = document.createElement('li');
    li.textContent = line;
    return li;
  }));
  $('step-up-hint').hidden = !Array.isArray(v.authorizationDetails);
  $('approve').textContent = v.approveLabel;
  $('request').hidden = false;
}

/** The sign-in is usable for this request: the server judges too (401 on approve), this spares a click. */
function signedInFits(v) {
  if (!v.signedIn) return false;
  const at = seconds(v.signedIn.authTime);
  if (typeof v.maxAge === 'number' && !(Date.now() / 1000 - at <= v.maxAge)) return false;
  // prompt=login wants a sign-in made for this request: one this tab made on this page (the
  // stored time may be written more or less finely than the sign-in's answer wrote it).
  if (String(v.prompt || '').split(' ').includes('login')) return Math.abs(Number(signedInHere()) - at) < 2;
  return true;
}
/** `authTime` (RFC 3339, or seconds) as Unix seconds; NaN when neither. */
const seconds = (time) => (typeof time === 'number' ? time : Date.parse(time) / 1000);
const MARK = () => `latchkey.op.signedInFor.${page.id}`;
function signedInHere() { try { return sessionStorage.getItem(MARK()); } catch { return null; } }
function markSignedIn(authTime) { try { sessionStorage.setItem(MARK(), String(seconds(authTime))); } catch { /* then the server asks again */ } }

function showConsent() {
  const v = page.view;
  $('signin').hidden = true;
  $('consent-title').textContent = t('Signed in as {username}', { username: v.signedIn.username });
  $('approve').disabled = $('deny').disabled = $('switch-account').disabled = false;
  $('consent').hidden = false;
  setState('consent');
  $('approve').focus();
}

function showSignIn() {
  $('consent').hidden = true;
  $('signin').hidden = false;
  $('signin-button').disabled = false;
  if (page.view.loginHint && !$('signin-username').value) $('signin-username').value = page.view.loginHint;
  setState('signin');
  startConditional();
}

// ---------------------------------------------------------------------------------------------
// Signing in (the OP session cookie)

function stopConditional() {
  if (page.conditional) { page.conditional.abort(); page.conditional = null; }
}

/** Conditional UI: the browser offers the passkeys in the username field's autofill. */
async function startConditional() {
  stopConditional();
  const PKC = window.PublicKeyCredential;
  if (!PKC || !PKC.isConditionalMediationAvailable) return;
  if (!(await PKC.isConditionalMediationAvailable().catch(() => false))) return;
  const controller = new AbortController();
  page.conditional = controller;
  let credential;
  try {
    credential = await assertion(page.view.publicKey, { signal: controller.signal, mediation: 'conditional' });
  } catch (e) {
    if (page.conditional !== controller) return; // stopped for the button or a decision
    page.conditional = null;
    if (!e.isCancellation) showError(describe(e, 'signin'));
    return;
  }
  if (page.conditional !== controller) return;
  page.conditional = null;
  await finishSignIn(credential);
}

async function signInWithButton(event) {
  event.preventDefault();
  stopConditional();
  clearError();
  $('signin-button').disabled = true;
  setState('signing-in');
  let credential;
  try {
    credential = await assertion(page.view.publicKey);
  } catch (e) {
    showSignIn();
    showError(describe(e, 'signin'));
    return;
  }
  await finishSignIn(credential);
}

async function finishSignIn(credential) {
  setState('signing-in');
  try {
    const result = await api('POST', requestPath('sign-in'), { body: credential });
    page.view.signedIn = result.signedIn;
    markSignedIn(result.signedIn.authTime);
  } catch (e) {
    await backToSignIn(describe(e, 'signin'));
    return;
  }
  clearError();
  announce(t('Signed in as {username}', { username: page.view.signedIn.username }));
  showConsent();
}

/** Signs in again with a fresh view (a new challenge; what the server now knows of the cookie). */
async function backToSignIn(message) {
  try {
    page.view = await fetchView(page.view.display.lang);
  } catch (e) {
    fail(e);
    return;
  }
  render();
  showSignIn();
  showError(message);
}

// ---------------------------------------------------------------------------------------------
// Approve and deny

async function decide(approve) {
  stopConditional();
  clearError();
  $('approve').disabled = $('deny').disabled = $('switch-account').disabled = $('language').disabled = true;
  try {
    const headers = {};
    if (approve && Array.isArray(page.view.authorizationDetails)) {
      // docs/oidc.md: the step-up for exactly the request's action; the cookie stands in for a Bearer.
      setState('step-up');
      // In the page's language: the receipt's display is what Latchkey renders for this action in it.
      const challenge = await api('POST', '/v1/step-up/challenges', {
        body: { method: 'passkey', action: page.view.stepUpAction }, headers: { 'Accept-Language': page.view.display.lang },
      });
      const credential = await assertion(challenge.publicKey);
      const approval = await api('POST', '/v1/step-up/verify', { body: { challengeId: challenge.challengeId, credential } });
      headers['Latchkey-Step-Up'] = approval.access_token;
    }
    setState(approve ? 'approving' : 'denying');
    const result = await api('POST', requestPath(approve ? 'approve' : 'deny'), { body: {}, headers });
    setState('redirecting');
    announce(t('Going back to the app…'));
    window.location.assign(result.redirectTo);
  } catch (e) {
    $('language').disabled = false;
    if (e.code === 'not_found') { fail(e); return; }
    // The cookie's session is too old for this request (max_age, prompt=login, acr_values) or ended.
    if (e.status === 401) { await backToSignIn(describe(e, 'approve')); return; }
    showConsent();
    showError(describe(e, 'approve'));
  }
}

function fail(e) {
  stopConditional();
  for (const id of ['request', 'signin', 'consent']) $(id).hidden = true;
  setState('error');
  showError(describe(e, 'approve'));
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const params = new URLSearchParams(location.search);
  page.id = params.get('request') || '';
  $('signin').addEventListener('submit', signInWithButton);
  $('approve').addEventListener('click', () => decide(true));
  $('deny').addEventListener('click', () => decide(false));
  $('switch-account').addEventListener('click', () => { clearError(); showSignIn(); $('signin-username').focus(); });
  let error = null;
  try {
    page.view = page.id ? await fetchView(params.get('lang')) : null;
    if (!page.view) error = new LatchkeyError('not_found', '', { status: 404 });
  } catch (e) {
    error = e;
  }
  // The server's language for this request (ui_locales, then Accept-Language, then the switcher).
  // Without a view (an unknown request), the switcher's choice in the address, else the browser's.
  await i18n.init(document, page.view ? page.view.display.lang : i18n.match(params.get('lang')));
  // Switching asks the server again in that language, so the lines (and the step-up that binds
  // them) are in it before anything is approved.
  i18n.switcher($('language'), (tag) => {
    const url = new URL(location.href);
    url.searchParams.set('lang', tag);
    location.replace(url.href);
  });
  if (error) { fail(error); return; }
  render();
  $('request-title').focus();
  if (signedInFits(page.view)) showConsent(); else showSignIn();
}

main();
