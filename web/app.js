// Latchkey web app: passkey sign-up, sign-in (button and autofill), passkey management and a
// step-up approval, against Latchkey's /v1 API (docs/api.md). No build step, no dependencies.
//
// Everything that talks to the server or the browser's WebAuthn API goes through the client module
// /latchkey.js (the one any other page imports too): tokens in sessionStorage (this tab only), one
// refresh in flight, the Assurance step-ups, Signal API hints, and failures as LatchkeyError values
// carrying Latchkey's `code`. This file is the page: views, words and the DOM.
//
// An ES module (strict by default), loaded by index.html with <script type="module">.
import { Latchkey, LatchkeyError, browserSupport, explainOrigin } from './latchkey.js';
import * as i18n from './i18n.js';
import { createVaultPanel } from './vault-panel.js';

const { t } = i18n;
/** Marks a text for the catalogs where it is defined; `t` translates it where it is shown. */
const N_ = (text) => text;

const $ = (id) => document.getElementById(id);
const SESSION_KEY = 'latchkey.session';

const app = {
  conditionalGeneration: 0,
  why: null,            // the sentence shown while a step-up is asked for
  emailRecovery: false, // the deployment mails recovery codes (GET /v1/sign-in/methods)
};

/** The one client: an access token it cannot renew ends the session here, with a sentence. */
const lk = new Latchkey({
  storageKey: SESSION_KEY,
  confirmStepUp: ({ action, reason }) => {
    if (reason) showBanner(t(reason), 'info', 'approval_needed');
    document.body.dataset.approval = action.type;
    return true;
  },
  onSessionEnded: (reason) => {
    showWelcome();
    showBanner(t(reason && reason.code !== 'network' ? CODE_MESSAGES.invalid_grant : CODE_MESSAGES.network), 'error',
      (reason && reason.code) || 'invalid_grant');
    startConditional();
  },
});

// ---------------------------------------------------------------------------------------------
// Messages

/** What each problem code means to the person in front of the screen. */
const CODE_MESSAGES = {
  invalid_request: N_('The request was not accepted. Please reload the page and try again.'),
  challenge_invalid: N_('That attempt expired or was already used. Please try again.'),
  origin_not_allowed: N_('This web address is not allowed to use passkeys here. Ask the site owner to allow it.'),
  rp_id_mismatch: N_('That passkey was made for a different website.'),
  user_presence_required: N_('Your device did not confirm you were there. Try again and approve the prompt.'),
  user_verification_required: N_('This needs your screen lock, fingerprint or face. Try again and verify it is you.'),
  signature_invalid: N_('The passkey’s signature could not be verified. Please try again.'),
  attestation_invalid: N_('Your authenticator could not prove what it is, so it was not accepted.'),
  algorithm_unsupported: N_('Your authenticator uses a key type this site does not support.'),
  credential_unknown: N_('That passkey is not registered here — it may have been revoked. Use another passkey or create an account.'),
  credential_exists: N_('This authenticator already holds a passkey for your account.'),
  sign_count_regression: N_('This passkey looks like it may have been copied, so it was blocked and flagged. Please contact support.'),
  action_mismatch: N_('The approval did not match the payment shown. Nothing was sent.'),
  key_revoked: N_('That key has been revoked.'),
  unauthorized: N_('Your session has ended. Please sign in again.'),
  forbidden: N_('You are not allowed to do that.'),
  not_found: N_('That was not found. It may already have been removed.'),
  conflict: N_('That conflicts with something that already exists.'),
  payload_too_large: N_('The request was too large.'),
  rate_limited: N_('Too many attempts. Please wait a moment and try again.'),
  invalid_grant: N_('Your session has expired. Please sign in again.'),
  internal_error: N_('Something went wrong on our side. Please try again in a moment.'),
  code_invalid: N_('That code is not right. Check the email and try again.'),
  // Outside a recovery, the refusal of a held passkey (one added by a recovery, an email sign-in or a
  // ticket), which approves nothing until its hold ends; a recovery's own waiting period is 'recovery:'.
  recovery_pending: N_('This passkey was added recently and is on hold, so it cannot approve changes yet. Use another passkey, or try again when its hold ends (shown in your passkey list).'),
  last_passkey: N_('This passkey is your last way in. Add a recovery method or another passkey first.'),
  step_up_required: N_('This needs a fresh approval with your passkey.'),
  network: N_('Cannot reach the server. Check your connection and try again.'),
};

/** Messages that depend on what the person was doing. */
const CONTEXT_MESSAGES = {
  'signup:conflict': N_('That username is taken. Choose another one, or sign in if it is yours.'),
  'signup:credential_exists': N_('This passkey is already registered. Sign in with it instead.'),
  'add:credential_exists': N_('This passkey is already on your account.'),
  'stepup:not_found': N_('Payment approval is not available on this server yet.'),
  'stepup:conflict': N_('This approval was already used. Start a new one.'),
  'stepup:challenge_invalid': N_('The approval expired or was already used. Nothing was sent — please approve again.'),
  'code:challenge_invalid': N_('That code expired, was already used, or was tried too often. Ask for a new one.'),
  'recovery:unauthorized': N_('This recovery was cancelled, already used or has expired. Start again.'),
  'recovery:recovery_pending': N_('Your recovery is still in its waiting period. Come back when it ends.'),
  'recovery:code_invalid': N_('That recovery code is not right, or was already used.'),
  'email:conflict': N_('Another account has already verified this address.'),
  'ciba:not_found': N_('This request was already answered or has expired. Nothing was approved.'),
  'ciba:step_up_required': N_('This service accepts only the device key in your phone’s app. Approve the request there.'),
};

const CEREMONY_WORDS = {
  signup: { cancelled: N_('Passkey creation was cancelled, so no account was created.'), what: N_('creating your passkey') },
  add: { cancelled: N_('Adding a passkey was cancelled. Nothing changed.'), what: N_('adding a passkey') },
  signin: { cancelled: N_('Sign-in was cancelled. Press “Sign in with a passkey” to try again.'), what: N_('signing in') },
  stepup: { cancelled: N_('Approval was cancelled. The transfer was not sent.'), what: N_('approving the transfer') },
  recovery: { cancelled: N_('Creating the new passkey was cancelled. Your recovery is still valid: try again.'), what: N_('creating your new passkey') },
  codes: { cancelled: N_('Approval was cancelled. No recovery codes were made.'), what: N_('approving new recovery codes') },
  upgrade: { cancelled: N_('No passkey was saved. You can add one any time.'), what: N_('saving a passkey') },
  vault: { cancelled: N_('Your passkey was not asked, so your vault stays as it was.'), what: N_('opening your vault') },
  ciba: { cancelled: N_('Approval was cancelled. Nothing was approved; the request is still waiting.'), what: N_('approving the request') },
};

/** A failure from the server (Latchkey's problem codes), as opposed to one from the browser's passkey prompt. */
const SERVER_SIDE = (e) => e instanceof LatchkeyError && (e.status > 0 || e.code === 'network');

/** One sentence for any failure of `context` ('signup', 'signin', 'add', 'stepup', …). */
function describe(error, context) {
  if (error instanceof LatchkeyError && error.code === 'credential_exists' && error.passkey) {
    // A retried registration whose first try was saved, its answer lost (the database failed over mid-request).
    return { text: context === 'add' ? t('Your passkey was saved.') : t('Your passkey was saved — sign in with it.'), code: 'passkey_saved' };
  }
  if (SERVER_SIDE(error)) {
    const known = CONTEXT_MESSAGES[`${context}:${error.code}`] || CODE_MESSAGES[error.code];
    let text = known ? t(known) : t('The server refused the request ({code}).', { code: error.code });
    if (error.code === 'rate_limited' && error.retryAfter) {
      text = t('Too many attempts. Please wait {seconds} seconds and try again.', { seconds: i18n.number(error.retryAfter) });
    }
    return { text, code: error.code };
  }
  const words = CEREMONY_WORDS[context] || CEREMONY_WORDS.signin;
  switch (error instanceof LatchkeyError ? error.code : 'unknown') {
    case 'timeout':
      return { text: t('The passkey prompt timed out while {what}. Please try again.', { what: t(words.what) }), code: 'timeout' };
    case 'cancelled': case 'aborted':
      return { text: t(words.cancelled), code: 'cancelled' };
    case 'invalid_state':
      return { text: t('This device already has a passkey for this account. Use it to sign in, or choose another device.'), code: 'invalid_state' };
    case 'security': case 'insecure_context':
      return { text: originProblem(error.rpId) || t('This page’s address cannot use passkeys for this site. Open it from its usual address.'), code: 'security' };
    case 'not_supported':
      return { text: t('Your device does not support the kind of passkey this site needs.'), code: 'not_supported' };
    default:
      return { text: t('Something went wrong while {what}. Please try again.', { what: t(words.what) }), code: 'unknown' };
  }
}

/**
 * explainOrigin's reason, in the page's language (the module's own words are English): at
 * http://127.0.0.1:PORT for rpId `localhost` (a SecurityError), name the address that works.
 */
function originProblem(rpId) {
  const o = explainOrigin(location, rpId || '');
  if (o.code === 'security' && rpId) {
    return t('Passkeys for this site work at {rpId}, not at {host}. Open {url} instead.', { rpId, host: location.hostname, url: o.suggestion + location.pathname });
  }
  if (o.code === 'security') {
    return o.suggestion
      ? t('Passkeys belong to a domain name, and this page was opened by its IP address ({host}), so the browser refuses them. Open {url} instead: localhost works over plain http.', { host: location.hostname, url: o.suggestion + location.pathname })
      : t('Passkeys belong to a domain name, and this page was opened by its IP address, so the browser refuses them. Open it by its domain name.');
  }
  if (o.code === 'insecure_context') return t('Passkeys need a secure page: open {url} (plain http works only on localhost).', { url: o.suggestion + location.pathname });
  return '';
}

function showError(error, context) {
  const { text, code } = describe(error, context);
  showBanner(text, 'error', code);
  if (!SERVER_SIDE(error) && !(error instanceof LatchkeyError && error.isCancellation)) console.warn(error);
}

function showBanner(text, kind = 'error', code = '') {
  const banner = $('banner');
  banner.hidden = false;
  banner.dataset.kind = kind;
  banner.dataset.code = code;
  $('banner-text').textContent = text;
}

function clearBanner() {
  const banner = $('banner');
  banner.hidden = true;
  banner.dataset.code = '';
  $('banner-text').textContent = '';
}

/** Polite screen-reader announcement for things that went well. */
function announce(text) {
  $('status').textContent = '';
  requestAnimationFrame(() => { $('status').textContent = text; });
}

// ---------------------------------------------------------------------------------------------
// Autofill (conditional mediation): a pending request that the browser completes when the person
// picks a passkey in the username field's suggestions.

async function startConditional() {
  const generation = ++app.conditionalGeneration;
  const mark = (state) => { if (generation === app.conditionalGeneration) document.body.dataset.conditional = state; };
  mark('starting');
  await lk.abortConditional();
  if (!(await browserSupport()).conditionalGet) { mark('unavailable'); return; }
  if (lk.session || generation !== app.conditionalGeneration) { mark('idle'); return; }
  mark('pending');
  try {
    // null: ended without a choice (no passkey here, dismissed) or superseded; quietly offered
    // again the next time the username field gets focus, never in a loop.
    const result = await lk.signInWithAutofill();
    if (result) startSession('autofill');
  } catch (e) {
    showError(e, 'signin');
  } finally {
    mark('idle');
  }
}

// ---------------------------------------------------------------------------------------------
// Sign up, sign in, sign out

async function signUp(event) {
  event.preventDefault();
  clearBanner();
  const username = $('signup-username').value.trim();
  const displayName = $('signup-display').value.trim() || username;
  const fieldError = $('signup-username-error');
  if (!username) {
    fieldError.textContent = t('Choose a username.');
    fieldError.hidden = false;
    $('signup-username').setAttribute('aria-invalid', 'true');
    $('signup-username').focus();
    return;
  }
  fieldError.hidden = true;
  $('signup-username').removeAttribute('aria-invalid');
  await busy($('signup-button'), t('Waiting for your passkey…'), async () => {
    try {
      await lk.signUp({ username, displayName });
      startSession('signup');
    } catch (e) {
      showError(e, 'signup');
      if (e instanceof LatchkeyError && e.passkey) $('signin-username').value = username;
      if (e instanceof LatchkeyError && e.code === 'conflict') $('signup-username').focus();
      if (!lk.session) startConditional();
    }
  });
}

async function signInWithButton(event) {
  event.preventDefault();
  clearBanner();
  const username = $('signin-username').value.trim();
  await busy($('signin-button'), t('Waiting for your passkey…'), async () => {
    try {
      await lk.signIn(username ? { username } : {});
      startSession('button');
    } catch (e) {
      showError(e, 'signin');
      if (!lk.session) startConditional();
    }
  });
}

/** The client has just started a session (`method` says how, for the words and the tests). */
function startSession(method) {
  document.body.dataset.signinMethod = method;
  clearBanner();
  showAccount(method);
}

async function signOut() {
  clearBanner();
  await lk.signOut();
  showWelcome();
  announce(t('You are signed out.'));
  startConditional();
}

// ---------------------------------------------------------------------------------------------
// Views

function setView(name) {
  document.body.dataset.view = name;
  $('view-welcome').hidden = name !== 'welcome';
  $('view-account').hidden = name !== 'account';
  $('view-recover').hidden = name !== 'recover';
  $('view-email').hidden = name !== 'email';
  $('session').hidden = name !== 'account';
}

function showWelcome() {
  $('signin-form').reset();
  $('signup-form').reset();
  $('signup-username-error').hidden = true;
  setView('welcome');
  delete document.body.dataset.signinMethod;
  clearPasskeys();
  clearSessions();
  if (vault) vault.reset();
  clearCIBA();
  $('transfer-result').hidden = true;
  $('welcome-title').focus();
}

async function showAccount(method) {
  const user = lk.user;
  setView('account');
  $('who').textContent = user.displayName && user.displayName !== user.username
    ? t('{name} ({username})', { name: user.displayName, username: user.username }) : user.username;
  $('account-title').textContent = t('Welcome, {name}', { name: user.displayName || user.username });
  $('account-lede').textContent = {
    signup: t('Your account is ready. Your passkey is saved on your device.'),
    autofill: t('You signed in with a passkey from autofill.'),
    button: t('You signed in with a passkey.'),
    restored: t('You are signed in.'),
    ticket: t('You saved a new passkey with the link from your administrator.'),
    email: t('You signed in with an email code.'),
    recovery: t('You recovered your account with a new passkey. Every other session and device key was signed out.'),
  }[method] || t('You are signed in with a passkey.');
  $('transfer-result').hidden = true;
  clearPasskeys();
  $('account-title').focus();
  announce(t('Signed in as {username}.', { username: user.username }));
  $('upgrade-offer').hidden = true;
  $('codes-shown').hidden = true;
  delete document.body.dataset.recoveryCodes;
  await loadPasskeys();
  await loadSessions();
  await loadCIBA();
  await loadRecoverySettings();
  await vault.load();
  if (method === 'email') offerUpgrade();
  followEndpointLink();
}

/**
 * The links /.well-known/passkey-endpoints gives credential managers, followed once signed in:
 * `/#passkeys` opens at the passkey list, `/?enroll=passkey` at its "Add a passkey" button, focused
 * (creating a passkey is the person's own click, never started for them).
 */
function followEndpointLink() {
  const params = new URLSearchParams(window.location.search);
  const enroll = params.get('enroll') === 'passkey';
  if (!enroll && window.location.hash === '#ciba') {
    // A push about a backchannel request opens `/#ciba`: its list, first.
    $('ciba').scrollIntoView({ block: 'start' });
    $('ciba-title').focus();
    return;
  }
  if (!enroll && window.location.hash !== '#passkeys') return;
  if (enroll) {
    params.delete('enroll');
    const rest = params.toString();
    history.replaceState(null, '', window.location.pathname + (rest ? `?${rest}` : '') + window.location.hash);
  }
  $('passkeys-title').scrollIntoView({ block: 'start' });
  (enroll ? $('add-passkey') : $('passkeys-title')).focus();
  document.body.dataset.endpointLink = enroll ? 'enroll' : 'manage';
}

// ---------------------------------------------------------------------------------------------
// Passkeys: list, rename, revoke, add

/** "just now", "5 minutes ago", or the date and time, in the page's language (Intl). */
const when = (iso) => i18n.relative(iso);

function clearPasskeys() {
  $('passkeys').replaceChildren();
  delete $('passkeys').dataset.count;
  $('passkeys-empty').hidden = true;
}

async function loadPasskeys(focusId) {
  let list;
  try {
    list = await lk.passkeys.list();
  } catch (e) {
    if (lk.session) showError(e, 'list');
    return;
  }
  const ul = $('passkeys');
  ul.replaceChildren(...list.map(renderPasskey));
  ul.dataset.count = String(list.length);
  $('passkeys-empty').hidden = list.length > 0;
  showHeldPasskeys(list);
  if (focusId) {
    const item = [...ul.children].find((li) => li.dataset.id === focusId);
    if (item) item.querySelector('.pk-rename-start').focus();
  }
}

/**
 * The provider's icon (`providerIcon`: same-origin URLs), light or dark as the page's colour
 * scheme is; null when the server knows none.
 */
function providerIcon(pk) {
  if (!pk.providerIcon) return null;
  const picture = document.createElement('picture');
  picture.className = 'pk-provider-icon';
  const dark = document.createElement('source');
  dark.media = '(prefers-color-scheme: dark)';
  dark.srcset = pk.providerIcon.dark;
  const img = document.createElement('img');
  img.src = pk.providerIcon.light;
  img.alt = pk.provider || t('Passkey');
  img.width = 20;
  img.height = 20;
  img.decoding = 'async';
  picture.append(dark, img);
  return picture;
}

function renderPasskey(pk) {
  const li = $('passkey-template').content.firstElementChild.cloneNode(true);
  li.dataset.id = pk.id;
  const name = li.querySelector('.pk-name');
  name.textContent = pk.name;
  name.id = `pk-name-${pk.id}`;
  li.setAttribute('aria-labelledby', name.id);
  const provider = li.querySelector('.pk-provider');
  provider.textContent = pk.provider || t('Passkey');
  const icon = providerIcon(pk);
  if (icon) provider.before(icon);
  const badges = li.querySelector('.pk-badges');
  const badge = (text, kind) => {
    const span = document.createElement('span');
    span.className = `badge badge-${kind}`;
    span.textContent = text;
    badges.append(span);
  };
  if (pk.backedUp) badge(t('Synced'), 'ok');
  else if (pk.backupEligible) badge(t('Can sync'), 'muted');
  else badge(t('This device only'), 'muted');
  if (pk.flagged) badge(t('Flagged: possible copy'), 'warn');
  if (pk.heldUntil) badge(t('On hold until {date}', { date: i18n.dateTime(pk.heldUntil) }), 'warn');
  const created = li.querySelector('.pk-created');
  created.textContent = t('Created {when}', { when: when(pk.createdAt) });
  created.title = i18n.dateTime(pk.createdAt);
  const used = li.querySelector('.pk-used');
  used.textContent = pk.lastUsedAt ? t('Last used {when}', { when: when(pk.lastUsedAt) }) : t('Never used to sign in');
  if (pk.lastUsedAt) used.title = i18n.dateTime(pk.lastUsedAt);

  const renameStart = li.querySelector('.pk-rename-start');
  const revokeStart = li.querySelector('.pk-revoke-start');
  renameStart.setAttribute('aria-label', t('Rename {name}', { name: pk.name }));
  revokeStart.setAttribute('aria-label', t('Revoke {name}', { name: pk.name }));
  const form = li.querySelector('.pk-rename');
  const input = form.querySelector('input');
  const inputId = `pk-rename-${pk.id}`;
  input.id = inputId;
  form.querySelector('label').htmlFor = inputId;
  const confirm = li.querySelector('.pk-confirm');
  const last = li.querySelector('.pk-last');

  const closeRename = () => { form.hidden = true; li.classList.remove('editing'); renameStart.focus(); };
  renameStart.addEventListener('click', () => {
    confirm.hidden = true;
    form.hidden = false;
    li.classList.add('editing');
    input.value = pk.name;
    input.focus();
    input.select();
  });
  form.querySelector('.pk-rename-cancel').addEventListener('click', closeRename);
  form.addEventListener('keydown', (e) => { if (e.key === 'Escape') { e.preventDefault(); closeRename(); } });
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const newName = input.value.trim();
    if (!newName) { input.focus(); return; }
    clearBanner();
    try {
      await lk.passkeys.rename(pk.id, newName);
      announce(t('Renamed to {name}.', { name: newName }));
      await loadPasskeys(pk.id);
      await loadSessions();  // they name the passkey that began each
    } catch (err) {
      showError(err, 'rename');
      input.focus();
    }
  });

  revokeStart.addEventListener('click', () => {
    form.hidden = true;
    last.hidden = true;
    confirm.hidden = false;
    confirm.querySelector('.pk-confirm-no').focus();
  });
  confirm.querySelector('.pk-confirm-no').addEventListener('click', () => { confirm.hidden = true; revokeStart.focus(); });
  confirm.addEventListener('keydown', (e) => { if (e.key === 'Escape') { confirm.hidden = true; revokeStart.focus(); } });
  confirm.querySelector('.pk-confirm-yes').addEventListener('click', async () => {
    clearBanner();
    try {
      const { sessionEnded } = await lk.passkeys.revoke(pk.id, { reason: WHY.revoke });
      clearBanner();
      if (sessionEnded) { sessionEndedWithPasskey(); return; }
      announce(t('{name} was revoked.', { name: pk.name }));
      await loadPasskeys();
      await loadSessions();
      $('passkeys-title').focus();
    } catch (err) {
      if (err instanceof LatchkeyError && err.code === 'last_passkey') { offerAnotherWayIn(confirm, last); return; }
      showError(err, 'revoke');
    }
  });
  last.querySelector('.pk-last-close').addEventListener('click', () => { last.hidden = true; revokeStart.focus(); });
  last.querySelector('.pk-last-codes').addEventListener('click', () => { last.hidden = true; createRecoveryCodes(); });
  last.querySelector('.pk-last-email').addEventListener('click', () => {
    last.hidden = true;
    $('email-new').scrollIntoView({ block: 'center' });
    $('email-new').focus();
  });
  last.querySelector('.pk-last-add').addEventListener('click', () => { last.hidden = true; addPasskey(); });
  return li;
}

/**
 * The last way in (docs/assurance.md): the server refuses (409 `last_passkey`, before any passkey is
 * asked for) to revoke the account's last passkey while it has no recovery code and no verified
 * address. The page says why and offers the ways to add one first.
 */
function offerAnotherWayIn(confirm, last) {
  confirm.hidden = true;
  last.hidden = false;
  last.querySelector('.pk-last-email').hidden = !app.emailRecovery;
  document.body.dataset.lastWayIn = 'refused';
  last.focus();
}

// ---------------------------------------------------------------------------------------------
// Sessions: where the user is signed in; "this device" is the session of the current token.

function clearSessions() {
  $('sessions').replaceChildren();
  delete $('sessions').dataset.count;
}

async function loadSessions() {
  let list;
  try {
    list = await lk.sessions.list();
  } catch (e) {
    if (lk.session) showError(e, 'list');
    return;
  }
  if (!lk.session) return;
  const ul = $('sessions');
  ul.replaceChildren(...list.map(renderSession));
  ul.dataset.count = String(list.length);
}

function passkeyName(credentialId) {
  const item = credentialId && [...$('passkeys').children].find((li) => li.dataset.id === credentialId);
  return item ? item.querySelector('.pk-name').textContent : null;
}

function renderSession(s) {
  const li = $('session-template').content.firstElementChild.cloneNode(true);
  li.dataset.id = s.id;
  li.dataset.current = String(Boolean(s.current));
  const name = li.querySelector('.s-name');
  name.id = `s-name-${s.id}`;
  name.textContent = s.current ? t('This device') : t('Another sign-in');
  li.setAttribute('aria-labelledby', name.id);
  const how = t({ passkey: N_('Passkey'), ticket: N_('Enrolment ticket'), email: N_('Email code'), recovery: N_('Account recovery'), oauth: N_('App sign-in') }[s.method] || s.method);
  const pk = passkeyName(s.credentialId);
  li.querySelector('.s-how').textContent = pk ? t('{how} “{passkey}”', { how, passkey: pk }) : how;
  if (s.current) {
    const badge = document.createElement('span');
    badge.className = 'badge badge-ok';
    badge.textContent = t('This device');
    li.querySelector('.s-badges').append(badge);
  }
  const auth = li.querySelector('.s-auth');
  auth.textContent = t('Signed in {when}', { when: when(s.authTime) });
  auth.title = i18n.dateTime(s.authTime);
  const used = li.querySelector('.s-used');
  used.textContent = t('Last active {when}', { when: when(s.lastUsedAt) });
  used.title = i18n.dateTime(s.lastUsedAt);
  const end = li.querySelector('.s-end');
  end.setAttribute('aria-label', s.current ? t('End this session (sign out here)') : t('End the session signed in {when}', { when: when(s.authTime) }));
  end.addEventListener('click', async () => {
    clearBanner();
    let ended;
    try {
      ended = await lk.sessions.end(s.id);
    } catch (err) {
      showError(err, 'revoke');
      return;
    }
    if (ended.current || s.current) {
      lk.forget();
      showWelcome();
      announce(t('This session ended. You are signed out.'));
      startConditional();
      return;
    }
    announce(t('That session was ended.'));
    await loadSessions();
    $('sessions-title').focus();
  });
  return li;
}

/** Revoking the passkey this session began with ends the session too (docs/api.md, DELETE /v1/passkeys/{id}). */
function sessionEndedWithPasskey() {
  lk.forget();
  showWelcome();
  showBanner(t('You revoked the passkey you signed in with, so this session ended. Sign in with another passkey.'), 'info',
    'session_ended');
  startConditional();
}

// docs/assurance.md: changes that weaken an account's protection need one of its passkeys *now*,
// bound to exactly that change. The client sends the change; when the server answers
// `step_up_required` its confirmStepUp hook shows the sentence below, and it asks for a passkey
// approval of that change and sends it again. (An email session adding its first passkey, or an
// account without passkeys setting its address, needs none: the first try goes through.)
const WHY = {
  add: N_('To add a passkey, approve with one of your passkeys first: a stolen sign-in alone must never be able to add one.'),
  revoke: N_('To remove a passkey, approve with one of your passkeys: someone holding only a stolen sign-in must not be able to lock you out.'),
  email: N_('To change the address your recovery mail goes to, approve with your passkey: a stolen sign-in must not be able to move your recovery.'),
};

async function addPasskey() {
  clearBanner();
  await busy($('add-passkey'), t('Waiting…'), async () => {
    try {
      const result = await lk.passkeys.add({ reason: WHY.add });
      clearBanner();
      announce(t('Passkey added.'));
      await loadPasskeys(result.passkey && result.passkey.id);
      await vault.passkeyAdded(result.passkey && result.passkey.id);
    } catch (e) {
      showError(e, 'add');
      if (e instanceof LatchkeyError && e.passkey) await loadPasskeys(e.passkey.id);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Step-up: approve exactly this transfer with a passkey

const TRANSFER = {
  type: 'transfer',
  amount: '200.00',
  currency: 'EUR',
  creditorName: 'Jana Novák',
  creditorIban: 'DE89370400440532013000',
  reference: 'Invoice 2024-117',
};

async function approveTransfer() {
  clearBanner();
  const result = $('transfer-result');
  result.hidden = true;
  result.dataset.state = '';
  await busy($('approve-transfer'), t('Waiting for your passkey…'), async () => {
    try {
      const approval = await lk.stepUp(TRANSFER);
      // What the bank's backend does next: spend the one-time step-up token on this exact action.
      await lk.consumeStepUp(approval.token, approval.actionHash);
      result.replaceChildren();
      const title = document.createElement('strong');
      title.textContent = t('Transfer approved and sent.');
      const detail = document.createElement('span');
      detail.textContent = ` ${t('{amount} to Jana Novák. Receipt {receipt}.', { amount: i18n.number(200, { style: 'currency', currency: 'EUR' }), receipt: approval.receiptId || '—' })}`;
      result.append(title, detail);
      result.dataset.state = 'approved';
      result.hidden = false;
      result.focus();
    } catch (e) {
      showError(e, 'stepup');
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Requests a service made on the backchannel (CIBA, docs/oidc.md): the account's pending ones, with
// what each asks in the server's words. The page approves only those whose client admits a passkey
// (`cibaApprover` `passkey`), with a step-up for exactly that request; the others are approved in
// the native app with its device key. Any of them can be denied here.

function clearCIBA() {
  $('ciba-requests').replaceChildren();
  delete $('ciba-requests').dataset.count;
  $('ciba-empty').hidden = true;
}

async function loadCIBA(focusTitle = false) {
  let list;
  try {
    list = await lk.ciba.list();
  } catch (e) {
    if (lk.session) showError(e, 'list');
    return;
  }
  if (!lk.session) return;
  const ul = $('ciba-requests');
  ul.replaceChildren(...list.map(renderCIBA));
  ul.dataset.count = String(list.length);
  $('ciba-empty').hidden = list.length > 0;
  if (focusTitle) $('ciba-title').focus();
}

async function refreshCIBA() {
  clearBanner();
  await busy($('ciba-refresh'), t('Checking…'), () => loadCIBA(true));
}

function renderCIBA(r) {
  const li = $('ciba-template').content.firstElementChild.cloneNode(true);
  li.dataset.id = r.authReqId;
  li.dataset.approver = (r.client && r.client.cibaApprover) || '';
  const title = li.querySelector('.ciba-client');
  title.id = `ciba-client-${r.authReqId}`;
  title.textContent = t('{client} asks for your approval', { client: r.client.name });
  li.setAttribute('aria-labelledby', title.id);
  if (r.bindingMessage) {
    li.querySelector('.ciba-binding').hidden = false;
    li.querySelector('.ciba-binding-text').textContent = r.bindingMessage;
  }
  // The server's lines, in the language this page asked for: every scope and every member of every
  // details entry, none dropped (what the step-up binds).
  const display = r.display || { lines: r.scopes || [], approve: t('Approve') };
  li.querySelector('.ciba-lines').replaceChildren(...display.lines.map((line) => {
    const item = document.createElement('li');
    item.textContent = line;
    return item;
  }));
  const expires = li.querySelector('.ciba-expires');
  expires.textContent = t('Asked {when}; it expires at {time}.', { when: when(r.createdAt), time: i18n.dateTime(r.expiresAt) });
  const approve = li.querySelector('.ciba-approve');
  const deny = li.querySelector('.ciba-deny');
  deny.setAttribute('aria-label', t('Deny the request of {client}', { client: r.client.name }));
  if (lk.ciba.approvable(r)) {
    approve.textContent = display.approve;
    approve.addEventListener('click', () => approveCIBA(r, approve));
  } else {
    approve.remove();
    li.querySelector('.ciba-elsewhere').hidden = false;
  }
  deny.addEventListener('click', () => denyCIBA(r, deny));
  return li;
}

async function approveCIBA(r, button) {
  clearBanner();
  await busy(button, t('Waiting for your passkey…'), async () => {
    try {
      await lk.ciba.approve(r);
      announce(t('Approved. {client} can go ahead.', { client: r.client.name }));
      showBanner(t('You approved the request of {client}.', { client: r.client.name }), 'info', 'ciba_approved');
      document.body.dataset.ciba = 'approved';
    } catch (e) {
      showError(e, 'ciba');
    }
  });
  // Approved, or answered elsewhere meanwhile (not_found): the list as it is now.
  await loadCIBA(true);
}

async function denyCIBA(r, button) {
  clearBanner();
  await busy(button, t('Denying…'), async () => {
    try {
      await lk.ciba.deny(r.authReqId);
      announce(t('Denied. {client} was told no.', { client: r.client.name }));
      showBanner(t('You denied the request of {client}.', { client: r.client.name }), 'info', 'ciba_denied');
      document.body.dataset.ciba = 'denied';
    } catch (e) {
      showError(e, 'ciba');
    }
  });
  await loadCIBA(true);
}

// ---------------------------------------------------------------------------------------------
// Recovery and fallback sign-in: "Lost your passkey?", email sign-in, the account's address and
// recovery codes, the pending-recovery banner, and conditional create (automatic passkey upgrade).

const recovery = { challengeId: null, token: null, result: null, upgrade: null };

/** The vault panel (web/vault-panel.js), made once the page's elements exist. */
let vault = null;

async function loadMethods() {
  try {
    const m = await lk.methods();
    $('email-signin-start').hidden = !m.emailSignIn;
    document.body.dataset.emailSignIn = m.emailSignIn ? 'on' : 'off';
    app.emailRecovery = Boolean(m.emailRecovery);
  } catch { $('email-signin-start').hidden = true; }
}

async function showRecover() {
  clearBanner();
  await lk.abortConditional();
  await stopConditionalCreate();
  $('recover-email-form').reset();
  $('recover-codes-form').reset();
  $('recover-code-step').hidden = true;
  $('recover-ready').hidden = true;
  $('recover-methods').hidden = false;
  recovery.challengeId = null;
  recovery.result = null;
  delete document.body.dataset.recovery;
  setView('recover');
  $('recover-title').focus();
}

async function showEmailSignIn() {
  clearBanner();
  await lk.abortConditional();
  $('email-form').reset();
  $('email-code-step').hidden = true;
  setView('email');
  $('email-title').focus();
}

async function backToWelcome() {
  await stopConditionalCreate();
  clearBanner();
  showWelcome();
  startConditional();
}

async function recoverSendCode(event) {
  event.preventDefault();
  clearBanner();
  const identifier = $('recover-identifier').value.trim();
  if (!identifier) { $('recover-identifier').focus(); return; }
  await busy($('recover-send'), t('Sending…'), async () => {
    try {
      const body = identifier.includes('@') ? { email: identifier } : { username: identifier };
      const c = await lk.recovery.start(body);
      recovery.challengeId = c.challengeId;
      $('recover-code-step').hidden = false;
      document.body.dataset.recovery = 'code-sent';
      $('recover-code').focus();
    } catch (e) { showError(e, 'code'); }
  });
}

async function recoverSubmitCode() {
  clearBanner();
  const code = $('recover-code').value.trim();
  if (!code || !recovery.challengeId) { $('recover-code').focus(); return; }
  await busy($('recover-code-submit'), t('Checking…'), async () => {
    try {
      recoveryReady(await lk.recovery.verifyCode(recovery.challengeId, code));
    } catch (e) { showError(e, 'code'); $('recover-code').focus(); }
  });
}

async function recoverWithCode(event) {
  event.preventDefault();
  clearBanner();
  const username = $('recover-username').value.trim();
  const recoveryCode = $('recover-recovery-code').value.trim();
  if (!username) { $('recover-username').focus(); return; }
  if (!recoveryCode) { $('recover-recovery-code').focus(); return; }
  await busy($('recover-codes-submit'), t('Checking…'), async () => {
    try {
      recoveryReady(await lk.recovery.useRecoveryCode(username, recoveryCode));
    } catch (e) { showError(e, 'recovery'); $('recover-recovery-code').focus(); }
  });
}

/** A recovery token: pending until notBefore (the waiting period), then it saves one new passkey. */
function recoveryReady(result) {
  recovery.result = result;
  recovery.token = result.recoveryToken;
  $('recover-methods').hidden = true;
  $('recover-ready').hidden = false;
  const notBefore = Date.parse(result.notBefore);
  if (notBefore > Date.now() + 1000) {
    document.body.dataset.recovery = 'pending';
    $('recover-ready-title').textContent = t('Recovery started: waiting period');
    $('recover-ready-text').textContent = t('For your safety, you can save a new passkey from {date}. We told your verified address; if this was not you, it can be cancelled from any signed-in session.', { date: i18n.dateTime(notBefore) });
    $('recover-create').hidden = true;
  } else {
    document.body.dataset.recovery = 'ready';
    $('recover-ready-title').textContent = t('Save a new passkey');
    $('recover-ready-text').textContent = t('It is you. Save a new passkey now: your other sessions and device keys will be signed out.');
    $('recover-create').hidden = false;
    conditionalRecoveryCreate();
  }
  $('recover-ready-title').focus();
}

/** Where the browser supports conditional create, the recovery's new passkey may also be saved
 *  automatically (the browser's passkey upgrade); the button stays the way that always works. */
async function conditionalRecoveryCreate() {
  if (!(await conditionalCreateAvailable())) return;
  const controller = new AbortController();
  let settle;
  recovery.upgrade = { controller, settled: new Promise((resolve) => { settle = resolve; }) };
  document.body.dataset.recoveryUpgrade = 'conditional';
  try {
    await lk.recovery.createPasskey(recovery.token, { mediation: 'conditional', signal: controller.signal });
    recovery.token = null;
    startSession('recovery');
  } catch { document.body.dataset.recoveryUpgrade = 'idle'; } finally {
    recovery.upgrade = null;
    settle();
  }
}

async function conditionalCreateAvailable() {
  return (await browserSupport()).conditionalCreate;
}

/** Ends a background conditional create before a modal ceremony (one request at a time). */
async function stopConditionalCreate() {
  const pending = recovery.upgrade;
  if (pending) { pending.controller.abort(); await pending.settled; }
}

async function recoverCreate() {
  await stopConditionalCreate();
  if (!recovery.token) return;  // the automatic upgrade got there first
  clearBanner();
  await busy($('recover-create'), t('Waiting for your passkey…'), async () => {
    try {
      await lk.recovery.createPasskey(recovery.token);
      recovery.token = null;
      startSession('recovery');
    } catch (e) { showError(e, 'recovery'); }
  });
}

async function emailSendCode(event) {
  event.preventDefault();
  clearBanner();
  const email = $('email-address').value.trim();
  if (!email) { $('email-address').focus(); return; }
  await busy($('email-send'), t('Sending…'), async () => {
    try {
      const c = await lk.email.startSignIn(email);
      recovery.challengeId = c.challengeId;
      $('email-code-step').hidden = false;
      $('email-code').focus();
    } catch (e) { showError(e, 'code'); }
  });
}

async function emailSubmitCode() {
  clearBanner();
  const code = $('email-code').value.trim();
  if (!code || !recovery.challengeId) { $('email-code').focus(); return; }
  await busy($('email-code-submit'), t('Checking…'), async () => {
    try {
      await lk.email.finishSignIn(recovery.challengeId, code);
      startSession('email');
    } catch (e) { showError(e, 'code'); $('email-code').focus(); }
  });
}

async function loadRecoverySettings() {
  let state;
  // No refresh of its own (loadPasskeys just did any): a 401 here means the session ended meanwhile.
  if (!lk.session) return;
  try { state = await lk.recovery.status(); } catch { return; }
  $('email-current').textContent = state.email || t('none');
  $('codes-left').textContent = i18n.number(state.recoveryCodesLeft);
  const pending = (state.pendingRecoveries || [])[0];
  const banner = $('recovery-pending');
  banner.hidden = !pending;
  banner.dataset.recoveryId = pending ? pending.recoveryId : '';
  document.body.dataset.pendingRecovery = pending ? 'yes' : 'no';
  if (pending) {
    $('recovery-pending-text').textContent = t(pending.method === 'email'
      ? 'Someone started recovering this account (by email code). It can replace your passkeys from {date}. If it was not you, cancel it now.'
      : 'Someone started recovering this account (with a recovery code). It can replace your passkeys from {date}. If it was not you, cancel it now.',
    { date: i18n.dateTime(pending.notBefore) });
  }
}

async function cancelRecovery() {
  clearBanner();
  const id = $('recovery-pending').dataset.recoveryId;
  if (!id) return;
  await busy($('recovery-cancel'), t('Cancelling…'), async () => {
    try {
      await lk.recovery.cancel(id);
      announce(t('The recovery was cancelled.'));
      showBanner(t('The recovery was cancelled. Its code no longer works.'), 'info', 'recovery_cancelled');
      await loadRecoverySettings();
      $('recovery-settings-title').focus();
    } catch (e) { showError(e, 'revoke'); }
  });
}

async function setEmail(event) {
  event.preventDefault();
  clearBanner();
  const email = $('email-new').value.trim();
  if (!email) { $('email-new').focus(); return; }
  await busy($('email-set'), t('Sending…'), async () => {
    try {
      const c = await lk.email.setAddress(email, { reason: WHY.email });
      clearBanner();
      recovery.challengeId = c.challengeId;
      $('email-verify-step').hidden = false;
      $('email-verify-code').focus();
    } catch (e) { showError(e, 'email'); }
  });
}

async function verifyEmail() {
  clearBanner();
  const code = $('email-verify-code').value.trim();
  if (!code) { $('email-verify-code').focus(); return; }
  await busy($('email-verify'), t('Checking…'), async () => {
    try {
      const r = await lk.email.verifyAddress(recovery.challengeId, code);
      $('email-set-form').reset();
      $('email-verify-step').hidden = true;
      announce(t('{email} is verified.', { email: r.email }));
      await loadRecoverySettings();
      document.body.dataset.emailVerified = 'yes';
      $('recovery-settings-title').focus();
    } catch (e) {
      showError(e, e instanceof LatchkeyError && e.code === 'conflict' ? 'email' : 'code');
      $('email-verify-code').focus();
    }
  });
}

/** New recovery codes behind a passkey step-up for exactly this action (docs/recovery.md). */
async function createRecoveryCodes() {
  clearBanner();
  await busy($('codes-create'), t('Waiting for your passkey…'), async () => {
    try {
      const r = await lk.recovery.createCodes();
      const list = $('codes-list');
      list.replaceChildren(...r.codes.map((c) => { const li = document.createElement('li'); li.textContent = c; return li; }));
      $('codes-shown').hidden = false;
      $('codes-left').textContent = i18n.number(r.codes.length);
      document.body.dataset.recoveryCodes = String(r.codes.length);
      $('codes-shown').focus();
    } catch (e) { showError(e, 'codes'); }
  });
}

/**
 * After an email sign-in: offer a passkey. Where the browser supports conditional create (automatic
 * passkey upgrade), a quiet request runs in the background (the server relaxes UP for exactly these
 * options); the button always works with an ordinary, modal create.
 */
async function offerUpgrade() {
  $('upgrade-offer').hidden = false;
  document.body.dataset.upgrade = 'offered';
  if (!(await conditionalCreateAvailable())) return;
  const controller = new AbortController();
  let settle;
  recovery.upgrade = { controller, settled: new Promise((resolve) => { settle = resolve; }) };
  document.body.dataset.upgrade = 'conditional';
  try {
    const result = await lk.passkeys.add({ mediation: 'conditional', signal: controller.signal });
    $('upgrade-offer').hidden = true;
    document.body.dataset.upgrade = 'saved';
    announce(t('A passkey was saved for next time.'));
    await loadPasskeys(result.passkey && result.passkey.id);
  } catch (e) {
    if (document.body.dataset.upgrade === 'conditional') document.body.dataset.upgrade = 'offered';
  } finally {
    recovery.upgrade = null;
    settle();
  }
}

async function upgradeCreate() {
  await stopConditionalCreate();
  if (document.body.dataset.upgrade === 'saved') return;
  clearBanner();
  await busy($('upgrade-create'), t('Waiting…'), async () => {
    try {
      const result = await lk.passkeys.add({ reason: WHY.add });
      $('upgrade-offer').hidden = true;
      document.body.dataset.upgrade = 'saved';
      announce(t('Passkey saved.'));
      await loadPasskeys(result.passkey && result.passkey.id);
    } catch (e) { showError(e, 'upgrade'); }
  });
}

// ---------------------------------------------------------------------------------------------
// Plumbing

/** Disables `button` and shows `label` while `work` runs; restores both afterwards. */
async function busy(button, label, work) {
  if (button.disabled) return;
  const original = button.innerHTML;
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  button.textContent = label;
  try {
    await work();
  } finally {
    button.innerHTML = original;
    button.disabled = false;
    button.removeAttribute('aria-busy');
  }
}

/** docs/assurance.md: the banner lists held passkeys beside pending recoveries. */
function showHeldPasskeys(passkeys) {
  const held = (passkeys || []).filter((pk) => pk.heldUntil);
  $('held-passkeys').hidden = held.length === 0;
  document.body.dataset.heldPasskeys = String(held.length);
  $('held-passkeys-list').replaceChildren(...held.map((pk) => {
    const li = document.createElement('li');
    li.textContent = t('{name} ({provider}), added {when}: approves nothing until {date}.', { name: pk.name, provider: pk.provider || t('Passkey'), when: when(pk.createdAt), date: i18n.dateTime(pk.heldUntil) });
    return li;
  }));
}

/**
 * `/?cancel=<token>` from a "recovery started" or "passkey added" mail: say what it undoes, ask, and
 * only then post it (docs/assurance.md: no session needed — the owner may have none left).
 */
function openCancelLink() {
  const token = new URLSearchParams(window.location.search).get('cancel');
  if (!token) return;
  const card = $('cancel-link');
  const recovery = token.startsWith('lkcan_rec_');
  // A quorum approval's notice (docs/approvals.md): the link vetoes that approval.
  const approval = token.startsWith('lkv_');
  $('cancel-link-text').textContent = approval
    ? t('This link stops the action that is waiting for approval on your account. It can then never be approved or used.')
    : recovery
      ? t('This link cancels the recovery of your account that was just started. Its code and recovery token stop working, and your passkeys stay as they are.')
      : t('This link removes the passkey that was just added to your account, and signs out every session it began. Your other passkeys stay as they are.');
  card.dataset.kind = approval ? 'approval' : recovery ? 'recovery' : 'passkey';
  card.hidden = false;
  document.body.dataset.cancelLink = 'asking';
  const done = (text, state) => {
    card.hidden = true;
    document.body.dataset.cancelLink = state;
    window.history.replaceState(null, '', window.location.pathname);
    showBanner(text, state === 'done' ? 'info' : 'error', state === 'done' ? 'cancel_done' : 'cancel_failed');
  };
  $('cancel-link-dismiss').addEventListener('click', () => done(t('Nothing was changed. The link still works while the recovery or the hold lasts.'), 'kept'));
  $('cancel-link-confirm').addEventListener('click', async () => {
    await busy($('cancel-link-confirm'), t('Undoing…'), async () => {
      try {
        if (approval) {
          await lk.request('POST', '/v1/approvals/veto', { body: { cancelToken: token } });
          done(t('The action was stopped: it can no longer be approved or used.'), 'done');
          return;
        }
        await lk.recovery.useCancelLink(token);
        done(recovery ? t('The recovery was cancelled.') : t('The passkey was removed and its sessions signed out.'), 'done');
      } catch (e) {
        done(e instanceof LatchkeyError && e.code === 'not_found'
          ? t('This link was already used or has expired, or there is nothing left to undo.')
          : t('The link could not be used right now. Try again in a moment.'), 'failed');
      }
    });
  });
  $('cancel-link-title').focus();
}

/**
 * `/?ticket=<ticket>`: a one-time enrolment link an admin issued for an account that lost every way in
 * (docs/admin-console.md). A passkey that fails to register keeps the link working; a
 * used or expired link is said in words, never a silent return to the sign-in page.
 */
function openTicketLink() {
  const ticket = new URLSearchParams(window.location.search).get('ticket');
  if (!ticket) return false;
  $('ticket-link').hidden = false;
  document.body.dataset.ticketLink = 'offered';
  $('ticket-link-create').addEventListener('click', async () => {
    clearBanner();
    await busy($('ticket-link-create'), t('Waiting for your passkey…'), async () => {
      try {
        await lk.passkeys.enrolWithTicket(ticket);
      } catch (e) {
        if (e instanceof LatchkeyError && e.status === 401) {
          $('ticket-link').hidden = true;
          window.history.replaceState(null, '', window.location.pathname);
          document.body.dataset.ticketLink = 'used-up';
          showBanner(t('This enrolment link is used up or expired. Ask for a new one.'), 'error', 'ticket_used_up');
          return;
        }
        showError(e, 'add');
        return;
      }
      $('ticket-link').hidden = true;
      window.history.replaceState(null, '', window.location.pathname);
      document.body.dataset.ticketLink = 'done';
      startSession('ticket');
    });
  });
  $('ticket-link-title').focus();
  return true;
}

async function init() {
  // The page's language first (navigator.languages, or the switcher's choice): the catalog
  // translates the page, and the client asks the server in it (Accept-Language; the account's
  // mails follow the language it last signed in with).
  lk.language = await i18n.init();
  i18n.switcher($('language'));
  vault = createVaultPanel({ lk, t, $, showBanner, clearBanner, showError, busy, announce });
  $('signup-form').addEventListener('submit', signUp);
  $('signin-form').addEventListener('submit', signInWithButton);
  $('signout').addEventListener('click', signOut);
  $('add-passkey').addEventListener('click', addPasskey);
  $('approve-transfer').addEventListener('click', approveTransfer);
  $('ciba-refresh').addEventListener('click', refreshCIBA);
  $('banner-close').addEventListener('click', () => { clearBanner(); $('main').focus(); });
  $('lost-passkey').addEventListener('click', showRecover);
  $('email-signin-start').addEventListener('click', showEmailSignIn);
  $('recover-back').addEventListener('click', backToWelcome);
  $('email-back').addEventListener('click', backToWelcome);
  $('recover-email-form').addEventListener('submit', recoverSendCode);
  $('recover-code-submit').addEventListener('click', recoverSubmitCode);
  $('recover-code').addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); recoverSubmitCode(); } });
  $('recover-codes-form').addEventListener('submit', recoverWithCode);
  $('recover-create').addEventListener('click', recoverCreate);
  $('email-form').addEventListener('submit', emailSendCode);
  $('email-code-submit').addEventListener('click', emailSubmitCode);
  $('email-code').addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); emailSubmitCode(); } });
  $('recovery-cancel').addEventListener('click', cancelRecovery);
  $('email-set-form').addEventListener('submit', setEmail);
  $('email-verify').addEventListener('click', verifyEmail);
  $('email-verify-code').addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); verifyEmail(); } });
  $('codes-create').addEventListener('click', createRecoveryCodes);
  $('upgrade-create').addEventListener('click', upgradeCreate);
  loadMethods();
  $('signin-username').addEventListener('focus', () => {
    if (!lk.session && document.body.dataset.conditional === 'idle') startConditional();
  });

  const support = await browserSupport();
  if (!support.supported && support.problem.code === 'unsupported_browser') {
    $('unsupported').hidden = false;  // its words are the page's (translated)
    document.body.dataset.unsupported = support.problem.code;
    setView('unsupported');
    document.body.dataset.ready = 'true';
    return;
  }
  if (!support.supported) {
    // The page's address, not the browser (http://127.0.0.1:PORT, or plain http): said at once, in
    // words that name the address that works; the forms stay, and a ceremony says it again.
    document.body.dataset.unsupported = support.problem.code;
    showBanner(originProblem(''), 'error', 'security');
  }
  openCancelLink();
  openTicketLink();
  if (lk.session) {
    showAccount('restored');
  } else {
    setView('welcome');
    startConditional();
  }
  document.body.dataset.ready = 'true';
}

document.addEventListener('DOMContentLoaded', init);
