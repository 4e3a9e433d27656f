// Latchkey admin console (docs/admin-console.md). No build step, no dependencies, nothing fetched from
// elsewhere. Signs the admin in with a discoverable passkey (user verification required); every
// change the server answers with 403 step_up_required is shown to the admin, approved with a
// passkey step-up bound to exactly that request ({"type":"latchkey.admin","method","path","body"}),
// and only then sent again with Latchkey-Step-Up. The DOM carries data-* state for the tests.
//
// An ES module (strict by default), loaded by admin/index.html with <script type="module">. All
// HTTP and WebAuthn goes through the client module (./latchkey.js, served at /admin/latchkey.js so
// that an admin listener serving only /admin/… paths has it too).
import { Latchkey, LatchkeyError, actions, base64url, browserSupport } from './latchkey.js';
import * as i18n from './i18n.js';

const { t } = i18n;

const SESSION_KEY = 'latchkey.admin';
const $ = (id) => document.getElementById(id);
const app = { me: null, page: 'origins', candidate: null, previewTimer: 0, previewSeq: 0 };

/** The console's client: its own session key; a change the server wants approved asks first. */
const lk = new Latchkey({
  storageKey: SESSION_KEY,
  confirmStepUp: ({ action, reason }) => confirmChange(reason, action),
});

// ---------------------------------------------------------------------------------------------
// Messages

function showBanner(text, code = '') {
  $('banner-text').textContent = text;
  $('banner').dataset.code = code;
  $('banner').hidden = false;
}
function clearBanner() { $('banner').hidden = true; $('banner').dataset.code = ''; }
function announce(text) { $('status').textContent = ''; setTimeout(() => { $('status').textContent = text; }, 30); }

/** Marks a catalog key that is looked up later (Tests/Browser/i18n_keys.py collects it). */
const N_ = (text) => text;

/**
 * The console's sentence for each problem `code` the admin API answers. The server's `detail` is
 * English for logs and developers; a page shows its own catalog's words, in its language.
 */
const CODE_MESSAGES = {
  invalid_request: N_('The server did not accept this input. Check the fields and try again.'),
  unauthorized: N_('Your admin session ended. Sign in again with your passkey.'),
  forbidden: N_('This account may not do that.'),
  not_found: N_('That was not found. It may already have been removed.'),
  conflict: N_('That conflicts with something that already exists.'),
  step_up_required: N_('This change needs a fresh approval with your passkey.'),
  challenge_invalid: N_('The approval expired or was already used. Nothing changed: try again.'),
  origin_not_allowed: N_('This web address is not on the origin allowlist, so passkeys cannot be used here.'),
  credential_exists: N_('This device already has a passkey for this account.'),
  credential_unknown: N_('That passkey is not registered here. Use another passkey.'),
  user_verification_required: N_('This needs your screen lock, fingerprint or face. Try again and verify it is you.'),
  recovery_pending: N_('This passkey is new and on hold, so it cannot approve changes yet. Use another passkey.'),
  last_passkey: N_("This passkey is the account's last way in: it has no other passkey, no unused recovery code and no verified address. Issue an enrolment link or have a recovery method added first."),
  payload_too_large: N_('The request was too large.'),
  rate_limited: N_('Too many attempts. Please wait a moment and try again.'),
  internal_error: N_('Something went wrong on the server. Please try again in a moment.'),
  network: N_('Cannot reach the server. Check your connection and try again.'),
};

/** A failure the server answered (its problem+json), in the console's words for its `code`. */
function serverMessage(code) {
  return CODE_MESSAGES[code] ? t(CODE_MESSAGES[code]) : t('The server refused the request ({code}).', { code });
}

function describe(error) {
  if (error instanceof LatchkeyError) {
    // A server's refusal carries its problem body (and an English detail): shown by code. A
    // LatchkeyError the console made itself carries its own translated sentence.
    if ((error.status > 0 && error.problem) || error.code === 'network') return serverMessage(error.code);
    if (error.status > 0) return error.message;
    if (error.isCancellation) return t('The passkey prompt was cancelled or timed out.');
    if (error.code === 'invalid_state') return t('This device already has a passkey for this account.');
  }
  return (error && error.message) || String(error);
}

/** A session-ending 401 was already told (signOut shows it); nothing more to say. */
const told = (e) => e instanceof LatchkeyError && e.status === 401;

// ---------------------------------------------------------------------------------------------
// HTTP

/** A raw call: `{status, ok, json}` whatever the status (for the pages that show a refusal). */
async function request(method, path, { body } = {}) {
  try {
    return { status: 200, ok: true, json: await lk.request(method, path, { body, auth: true, retry: false }) };
  } catch (e) {
    if (!(e instanceof LatchkeyError) || e.status === 0) throw e;
    return { status: e.status, ok: false, json: e.problem };
  }
}

/** A console API call: 401 signs out ("sign in again"), anything else not 2xx throws. */
async function api(method, path, { body, headers } = {}) {
  try {
    return await lk.request(method, path, { body, headers, auth: true, retry: false });
  } catch (e) {
    if (e instanceof LatchkeyError && e.status === 401 && lk.session) {
      signOut();
      showBanner(t('Your admin session ended. Sign in again with your passkey.'), 'session_ended');
    }
    throw e;
  }
}

// ---------------------------------------------------------------------------------------------
// Signing in

function signOut() {
  app.me = null;
  lk.signOut().catch(() => {});
  $('session').hidden = true;
  $('tabs').hidden = true;
  showSignIn();
}

function setView(name) {
  document.body.dataset.view = name;
  for (const v of ['signin', 'refused', 'console']) $(`view-${v}`).hidden = v !== name;
}

function ticketFromURL() { return new URLSearchParams(location.search).get('ticket'); }

function showSignIn() {
  setView('signin');
  const ticket = ticketFromURL();
  $('enrol-box').hidden = !ticket;
  $('signin').hidden = !!ticket;
  $('signin-lede').hidden = !!ticket;
}

/** Discoverable sign-in, user verification required: only such a session may use the admin API. */
async function signIn() {
  clearBanner();
  await lk.signIn({ userVerification: 'required' });
  await enter();
}

/**
 * The one-time link from `latchkey admins add` or `latchkey admins link`: the ticket vouches for the
 * admin's first passkey. A ceremony that fails keeps the ticket (the link still works: try again);
 * a ticket the server refuses (401: used up or expired) is said, not dropped into the sign-in screen.
 */
async function enrol() {
  clearBanner();
  const ticket = ticketFromURL();
  try {
    await lk.passkeys.enrolWithTicket(ticket, { userVerification: 'required' });
  } catch (e) {
    // Only the options request answers 401 here, and only for the ticket (it carries no session).
    if (e instanceof LatchkeyError && e.status === 401) {
      history.replaceState(null, '', '/admin/');
      showSignIn();
      document.body.dataset.enrolment = 'used-up';
      showBanner(t('This enrolment link is used up or expired. Ask for a new one (latchkey admins link <username>).'), 'ticket_used_up');
      return;
    }
    throw e;
  }
  history.replaceState(null, '', '/admin/');  // the ticket is spent: keep it out of history
  document.body.dataset.enrolled = 'true';
  await enter();
}

/** Who is this? An admin gets the console, anyone else the refusal. */
async function enter() {
  const r = await request('GET', '/admin/v1/me');
  if (r.status === 403) {
    $('refused-text').textContent = t('This account has no access to the admin console.');
    setView('refused');
    $('refused-title').focus();
    return;
  }
  if (!r.ok) { lk.forget(); showSignIn(); throw new LatchkeyError((r.json && r.json.code) || 'unauthorized', (r.json && r.json.detail) || `HTTP ${r.status}`, { status: r.status, problem: r.json }); }
  app.me = r.json;
  $('who').textContent = r.json.user ? t('Signed in as {username}', { username: r.json.user.username }) : r.json.actor;
  $('session').hidden = false;
  $('tabs').hidden = false;
  setView('console');
  await showPage(app.page);
}

// ---------------------------------------------------------------------------------------------
// Changes: sent, and when the server asks for it, approved with an action-bound passkey step-up.

/**
 * Shows what will change and waits for Approve (true) or Cancel / Escape (false). `words` names the
 * dialog's title, hint and approve button for a prompt that is not the admin's own step-up.
 */
function confirmChange(summary, action, words = {}) {
  const dialog = $('stepup');
  $('stepup-title').textContent = words.title || t('Approve this change with your passkey');
  $('stepup-hint').textContent = words.hint || t('The approval covers exactly this change, once.');
  $('stepup-approve').textContent = words.approve || t('Approve with passkey');
  $('stepup-what').textContent = summary;
  $('stepup-action').textContent = JSON.stringify(action, null, 2);
  dialog.returnValue = '';
  dialog.dataset.kind = words.kind || 'step-up';
  document.body.dataset.stepup = 'open';
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => {
      document.body.dataset.stepup = 'closed';
      resolve(dialog.returnValue === 'approve');
    }, { once: true });
    dialog.showModal();
    $('stepup-approve').focus();
  });
}

/** Sends one admin change; returns its JSON (or null), or false when the admin cancelled or it now waits for other admins. */
async function change(method, path, body, summary) {
  const action = actions.admin(method, path, body);
  // Under LATCHKEY_ADMIN_QUORUM: an approval this console asked for, for exactly this change.
  const asked = askedFor(action);
  if (asked) {
    const made = await changeWithApproval(asked, summary);
    if (made !== undefined) return made;
  }
  let approved = false;
  try {
    const json = await lk.withStepUp(action, (headers) => {
      approved = 'Latchkey-Step-Up' in headers;
      return api(method, path, { body, headers });
    }, summary);
    if (approved) document.body.dataset.lastApproved = `${method} ${path}`;
    return json;
  } catch (e) {
    if (e instanceof LatchkeyError && e.code === 'declined') {
      announce(t('Cancelled: nothing changed.'));
      return false;
    }
    if (e instanceof LatchkeyError && e.code === 'approval_required') return askApproval(action, summary);
    throw e;
  }
}

// ---------------------------------------------------------------------------------------------
// Quorum approvals (docs/approvals.md → "Admin quorum"): with LATCHKEY_ADMIN_QUORUM above 1 a change
// answers 403 approval_required. The console then opens an approval of policy latchkey.admin for
// exactly that change (its step-up action), approves it with the asking admin's own passkey (the
// policy counts the requester), and the change waits for the other admins on the "Waiting for
// approval" page. Once approved, the asking admin makes it with Latchkey-Approval: <id>, once.

/** The signed-in admin's user id ('' for none). */
function myId() { return (app.me && app.me.user && app.me.user.id) || ''; }

/** The approvals this admin asked for, by id: `{id, action, summary}` (this browser keeps them). */
function askedKey() { return `latchkey.admin.asked.${myId() || 'key'}`; }
function askedList() {
  try { return JSON.parse(localStorage.getItem(askedKey()) || '[]'); } catch { return []; }
}
function keepAsked(list) {
  try { localStorage.setItem(askedKey(), JSON.stringify(list)); } catch { /* this page only */ }
}
function forgetAsked(id) { keepAsked(askedList().filter((a) => a.id !== id)); }
function askedFor(action) {
  const key = JSON.stringify(action);
  return askedList().find((a) => JSON.stringify(a.action) === key) || null;
}

/** "{collected} of {needed} admins approved" for an approval as the API shows it. */
function tally(approval) {
  return t('{collected} of {needed} admins approved', { collected: i18n.number(approval.approvals.length), needed: i18n.number(approval.needed) });
}

function showQuorumNote(text, state) {
  $('quorum-note-text').textContent = text;
  $('quorum-note').dataset.state = state;
  $('quorum-note').hidden = false;
}
function clearQuorumNote() { $('quorum-note').hidden = true; $('quorum-note').dataset.state = ''; }

/**
 * An approval asked for earlier: made with it once approved (its JSON, or null), false while it
 * still waits (the note says how far it got), undefined when it is over (vetoed, expired, used:
 * the change is asked for afresh).
 */
async function changeWithApproval(asked, summary) {
  let approval;
  try {
    approval = await api('GET', `/v1/approvals/${encodeURIComponent(asked.id)}`);
  } catch (e) {
    if (e instanceof LatchkeyError && e.status === 404) { forgetAsked(asked.id); return undefined; }
    throw e;
  }
  if (approval.state === 'approved') return makeApproved(asked);
  if (approval.state === 'collecting' || approval.state === 'waiting') {
    showQuorumNote(t('“{summary}” still waits for other admins: {tally}.', { summary: summary || asked.summary, tally: tally(approval) }), approval.state);
    return false;
  }
  forgetAsked(asked.id);
  return undefined;
}

/** Makes an approved change with `Latchkey-Approval`; the approval is used up with it. */
async function makeApproved(asked) {
  const { method, path, body } = asked.action;
  const json = await api(method, path, { body: body === null ? undefined : body, headers: { 'Latchkey-Approval': asked.id } });
  forgetAsked(asked.id);
  clearQuorumNote();
  document.body.dataset.lastMade = `${method} ${path}`;
  announce(t('Done: the approved change was made.'));
  return json;
}

/**
 * Opens an approval for `action` (after the admin saw it), approves it with their own passkey and
 * says how many approvals it still needs. Returns false (nothing changed yet), or the change's JSON
 * when the admin's own approval already completed the quorum.
 */
async function askApproval(action, summary) {
  const ok = await confirmChange(summary, action, {
    title: t('Ask other admins to approve this change'),
    hint: t('This server needs several admins to approve every admin change. Your passkey approves it first; the other admins see it under “Waiting for approval”.'),
    approve: t('Ask, and approve with passkey'),
    kind: 'ask',
  });
  if (!ok) { announce(t('Cancelled: nothing changed.')); return false; }
  const opened = await api('POST', '/v1/approvals', { body: { policy: 'latchkey.admin', action, subject: null } });
  const asked = { id: opened.id, action, summary };
  keepAsked([...askedList().filter((a) => a.id !== opened.id), asked]);
  let approval = opened;
  try {
    approval = await vote(opened.id, opened.actionHash);
  } catch (e) {
    // Asked, but not approved by the asking admin: it still waits, and they can approve it on the page.
    if (!told(e)) showBanner(describe(e), e.code || e.name || '');
  }
  document.body.dataset.asked = opened.id;
  if (approval.state === 'approved') return makeApproved(asked);
  showQuorumNote(t('Asked for approval: “{summary}”. {tally}; it now waits for other admins.', { summary, tally: tally(approval) }), approval.state);
  return false;
}

/** This admin's passkey approval of approval `id` (a step-up for exactly it) → the approval. */
async function vote(id, actionHash) {
  const { token } = await lk.stepUp({ type: 'latchkey.approval', approvalId: id, actionHash });
  return api('POST', `/v1/approvals/${encodeURIComponent(id)}/approve`, { headers: { 'Latchkey-Step-Up': token } });
}

/** Usernames by user id (the approvals name accounts by id), looked up once each. */
const usernames = new Map();
async function username(id) {
  if (!usernames.has(id)) {
    usernames.set(id, api('GET', `/admin/v1/users/${encodeURIComponent(id)}`).then((d) => d.user.username).catch(() => id));
  }
  return usernames.get(id);
}

/** What a change does, in one line: its method and path. */
function changeLine(action) { return `${action.method} ${action.path}`; }

async function approvalItem(a, { approvedList = false } = {}) {
  const me = myId();
  const mine = a.requester === me;
  const voted = a.approvals.some((v) => v.userId === me);
  const requester = await username(a.requester);
  const voters = await Promise.all(a.approvals.map(async (v) => el('li', { dataset: { user: v.userId, receipt: v.receiptId } },
    t('{user} approved {date} · receipt {receipt}', { user: await username(v.userId), date: when(v.approvedAt), receipt: v.receiptId }))));
  const line = changeLine(a.action);
  const buttons = el('span', { class: 'approval-actions' });
  if (approvedList) {
    buttons.append(el('button', { type: 'button', class: 'btn btn-small btn-primary a-make', textContent: t('Make the change'),
      'aria-label': t('Make the change {change}', { change: line }), onclick: (ev) => makeFromList(ev.currentTarget, a) }));
  } else {
    if (!voted && a.state === 'collecting') {
      buttons.append(el('button', { type: 'button', class: 'btn btn-small btn-primary a-approve', textContent: t('Approve with passkey'),
        'aria-label': t('Approve {change} with your passkey', { change: line }), onclick: (ev) => approveFromList(ev.currentTarget, a, requester) }));
    }
    buttons.append(el('button', { type: 'button', class: 'btn btn-small btn-remove a-veto', textContent: t('Veto'),
      'aria-label': t('Veto {change}', { change: line }), onclick: (ev) => vetoFromList(ev.currentTarget, a) }));
  }
  return el('li', { class: 'approval-item', dataset: { id: a.id, state: a.state, mine: String(mine), voted: String(voted) } },
    el('span', { class: 'item-main' },
      el('span', { class: 'item-title' }, line, el('span', { class: a.state === 'approved' ? 'tag tag-ok' : 'tag tag-warn' }, stateWord(a.state))),
      el('span', { class: 'item-meta' }, t('asked by {user} · {tally} · expires {date}', { user: mine ? t('you ({user})', { user: requester }) : requester, tally: tally(a), date: when(a.expiresAt) })),
      el('pre', { class: 'approval-action', 'aria-label': t('The change, exactly') }, JSON.stringify(a.action, null, 2)),
      a.approvals.length ? el('ul', { class: 'voters', 'aria-label': t('Approvals given') }, ...voters) : null,
      el('span', { class: 'item-meta' }, t('approval {id}', { id: a.id }))),
    buttons);
}

function stateWord(state) {
  return ({ collecting: t('collecting approvals'), waiting: t('waiting for its time lock'), approved: t('approved'),
    used: t('used'), vetoed: t('vetoed'), expired: t('expired') })[state] || state;
}

async function loadApprovals() {
  const { approvals } = await api('GET', '/admin/v1/approvals');
  // The approvals this admin asked for that the list no longer names (their own reads tell their state).
  const listed = new Set(approvals.map((a) => a.id));
  const all = [...approvals];
  for (const asked of askedList()) {
    if (listed.has(asked.id)) continue;
    try {
      const a = await api('GET', `/v1/approvals/${encodeURIComponent(asked.id)}`);
      if (['collecting', 'waiting', 'approved'].includes(a.state)) all.push(a); else forgetAsked(asked.id);
    } catch (e) {
      if (e instanceof LatchkeyError && e.status === 404) forgetAsked(asked.id); else throw e;
    }
  }
  // Approved changes this admin asked for are theirs to make; everything else waits for admins.
  const me = myId();
  const ready = all.filter((a) => a.state === 'approved' && a.requester === me);
  const waiting = all.filter((a) => !ready.includes(a));
  fill($('approvals'), await Promise.all(waiting.map((a) => approvalItem(a))), t('No changes are waiting for approval.'));
  fill($('approved'), await Promise.all(ready.map((a) => approvalItem(a, { approvedList: true }))), t('No approved changes to make.'));
}

async function approveFromList(button, a, requester) {
  await busy(button, async () => {
    const ok = await confirmChange(t('{user} asks to make this change: {change}', { user: requester, change: changeLine(a.action) }), a.action, {
      title: t('Approve another admin’s change with your passkey'),
      hint: t('Your approval counts once, for exactly this change; {tally} so far.', { tally: tally(a) }),
      kind: 'approve',
    });
    if (!ok) { announce(t('Cancelled: nothing changed.')); button.focus(); return; }
    const r = await vote(a.id, a.actionHash);
    document.body.dataset.lastVote = a.id;
    await loadApprovals();
    announce(t('Approved: {tally}.', { tally: tally(r) }));
    $('approvals-title').focus();
  });
}

async function vetoFromList(button, a) {
  await busy(button, async () => {
    const ok = await confirmChange(t('Veto this change: {change}', { change: changeLine(a.action) }), a.action, {
      title: t('Veto this change?'), hint: t('A vetoed change cannot be approved or made; whoever asked must ask again.'),
      approve: t('Veto'), kind: 'veto',
    });
    if (!ok) { button.focus(); return; }
    await api('POST', `/v1/approvals/${encodeURIComponent(a.id)}/veto`);
    forgetAsked(a.id);
    await loadApprovals();
    announce(t('Vetoed: {change}.', { change: changeLine(a.action) }));
    $('approvals-title').focus();
  });
}

async function makeFromList(button, a) {
  await busy(button, async () => {
    await makeApproved(askedList().find((x) => x.id === a.id) || { id: a.id, action: a.action });
    await loadApprovals();
    $('approvals-title').focus();
  });
}

async function busy(button, work) {
  button.disabled = true;
  try { return await work(); } catch (e) { if (!told(e)) showBanner(describe(e), e.code || e.name || ''); } finally {
    button.disabled = false;
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Pages

async function showPage(page) {
  app.page = page;
  document.body.dataset.page = page;
  for (const tab of document.querySelectorAll('.tab')) {
    if (tab.dataset.page === page) tab.setAttribute('aria-current', 'page'); else tab.removeAttribute('aria-current');
  }
  for (const p of ['origins', 'apps', 'users', 'audit', 'webhooks', 'clients', 'approvals']) $(`page-${p}`).hidden = p !== page;
  document.body.dataset.loaded = '';
  try {
    if (page === 'origins') await loadOrigins();
    if (page === 'apps') { await loadApps(); await refreshPreview(); }
    if (page === 'audit') await loadAudit();
    if (page === 'webhooks') await loadWebhooks();
    if (page === 'clients') await loadClients();
    if (page === 'approvals') { clearQuorumNote(); await loadApprovals(); }
  } catch (e) { if (!told(e)) showBanner(describe(e), e.code || ''); }
  document.body.dataset.loaded = page;
}

function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'class') e.className = v; else if (k === 'dataset') Object.assign(e.dataset, v); else if (k in e) e[k] = v; else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

/** A passkey's provider icon (`providerIcon`), light or dark with the colour scheme; null when none is known. */
function providerIcon(p) {
  if (!p.providerIcon) return null;
  return el('picture', { class: 'provider-icon' },
    el('source', { media: '(prefers-color-scheme: dark)', srcset: p.providerIcon.dark }),
    el('img', { src: p.providerIcon.light, alt: p.provider || t('Passkey'), width: 18, height: 18, decoding: 'async' }));
}

function fill(list, items, empty) {
  list.replaceChildren(...(items.length ? items : [el('li', { class: 'empty' }, empty)]));
  list.dataset.count = String(items.length);
}

/** A date and time in the console's language (Intl), or "never". */
function when(iso) {
  return iso ? i18n.dateTime(iso) : t('never');
}

// --- Origins

/** keytool's "AB:CD:…" SHA-256 → the android:apk-key-hash: origin (base64url of the 32 bytes). */
/**
 * A signing-certificate fingerprint as admins paste it → its android:apk-key-hash origin, or null.
 * Takes what the server and `latchkey apk-key-hash` take: keytool's AB:CD:… (also the whole line,
 * `SHA256: AB:CD:…`, or the Play Console's `SHA-256 certificate fingerprint: …`), 64 hex digits,
 * the 43-character base64url hash, or the origin itself.
 */
function apkKeyHash(fingerprint) {
  let text = fingerprint.replace(/\s/g, '');
  if (text.startsWith('android:apk-key-hash:')) text = text.slice('android:apk-key-hash:'.length);
  const label = /^([^:]*):/.exec(text);
  if (label && label[1].length > 2 && label[1].toLowerCase().startsWith('sha')) text = text.slice(label[0].length);
  if (/^[A-Za-z0-9_-]{43}$/.test(text) && base64url.encode(base64url.decode(text)) === text) return `android:apk-key-hash:${text}`;
  if (text.includes(':') && !text.split(':').every((pair) => pair.length === 2)) return null;
  const hex = text.replace(/:/g, '');
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) return null;
  const bytes = new Uint8Array(32);
  for (let i = 0; i < 32; i++) bytes[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return `android:apk-key-hash:${base64url.encode(bytes)}`;
}

function showFingerprintOrigin() {
  const value = $('fp-input').value.trim();
  const out = $('fp-origin');
  const origin = value ? apkKeyHash(value) : null;
  out.textContent = origin || (value ? 'not a SHA-256 fingerprint (32 bytes in hex, colons allowed)' : '—');
  out.dataset.state = origin ? 'ok' : (value ? 'invalid' : 'empty');
}

const originPath = (o) => `/admin/v1/origins/${encodeURIComponent(o)}`;

async function loadOrigins() {
  const { origins } = await api('GET', '/admin/v1/origins');
  fill($('origins'), origins.map((o) => el('li', { dataset: { origin: o.origin } },
    el('span', { class: 'item-main' }, el('span', { class: 'item-title' }, o.origin),
      el('span', { class: 'item-meta' }, t('source: {source}', { source: o.source }))),
    el('button', { type: 'button', class: 'btn btn-small btn-remove o-remove', textContent: t('Remove'),
      'aria-label': t('Remove {name}', { name: o.origin }), onclick: (ev) => removeOrigin(ev.currentTarget, o.origin) }))),
  t('No origins yet.'));
}

async function addOrigin(event) {
  event.preventDefault();
  const origin = $('origin-input').value.trim();
  if (!origin) { $('origin-input').focus(); return; }
  await busy($('origin-add'), async () => {
    const r = await change('POST', '/admin/v1/origins', { origin }, t('Allow the origin {origin}', { origin }));
    if (r === false) return;
    $('origin-input').value = '';
    await loadOrigins();
    announce(t('Allowed {origin}', { origin: r.origin }));
  });
}

async function addFingerprint(event) {
  event.preventDefault();
  const fingerprint = $('fp-input').value.trim();
  if (!fingerprint) { $('fp-input').focus(); return; }
  await busy($('fp-add'), async () => {
    const r = await change('POST', '/admin/v1/origins', { androidFingerprint: fingerprint },
      t('Allow the Android app signed with {origin}', { origin: apkKeyHash(fingerprint) || fingerprint }));
    if (r === false) return;
    $('fp-input').value = '';
    showFingerprintOrigin();
    await loadOrigins();
    announce(t('Allowed {origin}', { origin: r.origin }));
  });
}

async function removeOrigin(button, origin) {
  await busy(button, async () => {
    const r = await change('DELETE', originPath(origin), undefined, t('Remove {origin} from the allowed origins', { origin }));
    if (r === false) { button.focus(); return; }
    await loadOrigins();
    $('origins-list-title').setAttribute('tabindex', '-1');
    $('origins-list-title').focus();
    announce(t('Removed {name}', { name: origin }));
  });
}

// --- Apps and the live preview

async function loadApps() {
  const { apps } = await api('GET', '/admin/v1/apps');
  fill($('apps'), apps.map((a) => el('li', { dataset: { app: a.id } },
    el('span', { class: 'item-main' }, el('span', { class: 'item-title' }, a.id),
      el('span', { class: 'item-meta' }, a.platform === 'android'
        ? a.fingerprints.map((f) => f.origin).join(' · ') : t('webcredentials {appId}', { appId: a.appId }))),
    el('button', { type: 'button', class: 'btn btn-small btn-remove a-remove', textContent: t('Remove'), 'aria-label': t('Remove {name}', { name: a.id }),
      onclick: (ev) => removeApp(ev.currentTarget, a.id) }))),
  t('No apps declared.'));
}

function iosDeclaration() {
  const teamId = $('ios-team').value.trim(), bundleId = $('ios-bundle').value.trim();
  return teamId || bundleId ? { platform: 'ios', teamId, bundleId } : null;
}

function androidDeclaration() {
  const packageName = $('android-package').value.trim();
  const fingerprints = $('android-fps').value.split(/\n+/).map((s) => s.trim()).filter(Boolean);
  return packageName || fingerprints.length ? { platform: 'android', packageName, fingerprints } : null;
}

function schedulePreview(candidate) {
  app.candidate = candidate;
  clearTimeout(app.previewTimer);
  $('preview').dataset.state = 'loading';
  app.previewTimer = setTimeout(refreshPreview, 250);
}

function pretty(text) {
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; }
}

/**
 * The console's words for each problem `code` the association checker answers in the preview
 * (the files as built or kept in LATCHKEY_WELLKNOWN_DIR; how they are served is `latchkey wellknown
 * check --url`'s business). The problem's `message` and `fix` are English for the CLI and logs; the
 * console says its own sentence, with the file and the rpId the problem and the preview carry.
 */
const CHECKER_MESSAGES = {
  empty_file: [N_('{file} is empty.'), N_('Write the JSON document into it, or remove it from LATCHKEY_WELLKNOWN_DIR so the server builds it.')],
  invalid_json: [N_('{file} is not valid JSON, so the platforms ignore it.'), N_('Fix its syntax, or regenerate it with latchkey wellknown build.')],
  aasa_no_webcredentials: [N_('{file} has no usable webcredentials.apps list, so iOS will not offer passkeys for {rpId} in these apps.'), N_('List each app as "TEAMID.bundle.id" under webcredentials.apps (declare iOS apps here).')],
  appid_without_team: [N_('{file} names an app that is not TEAMID.bundle.id.'), N_('Prefix the bundle ID with the 10-character Team ID.')],
  assetlinks_shape: [N_('{file} is not shaped as Android expects (a list of statements, each with a package name and fingerprints).'), N_('Regenerate it with latchkey wellknown build, or declare the Android apps here.')],
  missing_relation: [N_('An app in {file} lacks the relation get_login_creds, so Android will not use passkeys for {rpId} in it.'), N_('Add "delegate_permission/common.get_login_creds" to the relation list of that statement.')],
  malformed_fingerprint: [N_('A fingerprint in {file} is not 32 colon-separated hex bytes.'), N_('Copy the SHA-256 line from keytool -list -v or the Play Console.')],
  fingerprint_not_allowlisted: [N_('A signing fingerprint in {file} is not on the origin allowlist, so the server refuses the passkeys of that app.'), N_('Declare the Android app here, or add its android:apk-key-hash origin on the Origins page.')],
  origin_without_app: [N_('An allowlisted Android origin has no app in {file}, so Android will not offer passkeys to it.'), N_('Declare the Android app with that fingerprint here, or remove the origin on the Origins page.')],
  ios_origin_not_allowlisted: [N_('{file} names iOS apps, but https://{rpId} is not on the origin allowlist.'), N_('Add https://{rpId} on the Origins page (declaring an iOS app here does it for you).')],
  related_origins_shape: [N_('{file} has no origins list.'), N_('Write {"origins": ["https://other.example"]}, or regenerate it with latchkey wellknown build.')],
  related_origin_invalid: [N_('{file} lists an entry that is not an https://host[:port] origin.'), N_('List origins as https://host[:port] without a path.')],
  related_origins_labels: [N_('{file} lists more distinct domain labels than browsers honour; origins beyond the first ones will fail.'), N_('Keep the related origins to at most 5 registrable-domain labels.')],
};

/** A checker problem in the console's language; a code it does not know is named, never its English text. */
function checkerWords(problem, rpId) {
  const known = CHECKER_MESSAGES[problem.code];
  const values = { file: problem.file, rpId, code: problem.code };
  return known
    ? { message: t(known[0], values), fix: t(known[1], values) }
    : { message: t('{file}: the association checker reports {code}.', values),
        fix: t('Run latchkey wellknown check for the details.') };
}

/** POST /admin/v1/wellknown/preview: the files with the declaration being typed, and the checks. */
async function refreshPreview() {
  const seq = ++app.previewSeq;
  const candidate = app.candidate;
  const preview = $('preview');
  preview.dataset.state = 'loading';
  const r = await request('POST', '/admin/v1/wellknown/preview', { body: candidate ? { app: candidate } : {} });
  if (seq !== app.previewSeq) return;  // a newer keystroke's preview is on its way
  const problems = $('pv-problems');
  if (!r.ok) {
    preview.dataset.state = 'invalid';
    problems.replaceChildren(el('li', { class: 'invalid', dataset: { code: (r.json && r.json.code) || '' } },
      t('Not a valid declaration yet: check the fields above.')));
    return;
  }
  const byName = Object.fromEntries(r.json.files.map((f) => [f.name, f]));
  $('pv-aasa').textContent = pretty(byName['apple-app-site-association'].content);
  $('pv-assetlinks').textContent = pretty(byName['assetlinks.json'].content);
  $('pv-webauthn').textContent = pretty(byName.webauthn.content);
  const kept = r.json.files.filter((f) => f.source === 'directory').map((f) => f.name);
  $('preview-note').textContent = (candidate ? t('With the app you are typing, before it is added.') : t('As served now.')) + ' '
    + (kept.length ? t('Served from LATCHKEY_WELLKNOWN_DIR (declarations do not change them): {files}.', { files: kept.join(', ') }) : '');
  problems.replaceChildren(...(r.json.problems.length
    ? r.json.problems.map((p) => {
      const words = checkerWords(p, r.json.rpId);
      return el('li', { dataset: { code: p.code } }, words.message, el('span', { class: 'fix' }, t('Fix: {fix}', { fix: words.fix })));
    })
    : [el('li', { class: 'ok' }, t('ok: valid association files for rpId {rpId}', { rpId: r.json.rpId }))]));
  preview.dataset.state = r.json.ok ? 'ok' : 'problems';
  preview.dataset.for = candidate ? `${candidate.platform}:${candidate.packageName || `${candidate.teamId}.${candidate.bundleId}`}` : '';
}

async function addApp(event, declaration, button, clear) {
  event.preventDefault();
  if (!declaration) return;
  await busy(button, async () => {
    const r = await change('POST', '/admin/v1/apps', declaration, t('Declare the app {app} (its origins join the allowlist)', { app: `${declaration.platform}:${declaration.packageName || `${declaration.teamId}.${declaration.bundleId}`}` }));
    if (r === false) return;
    clear();
    app.candidate = null;
    await loadApps();
    await refreshPreview();
    announce(t('Declared {id}', { id: r.id }));
  });
}

async function removeApp(button, id) {
  await busy(button, async () => {
    const r = await change('DELETE', `/admin/v1/apps/${encodeURIComponent(id)}`, undefined, t('Remove the app {id} and the origins it brought', { id }));
    if (r === false) { button.focus(); return; }
    await loadApps();
    await refreshPreview();
    announce(t('Removed {name}', { name: id }));
  });
}

// --- Users

async function findUsers(event) {
  event.preventDefault();
  const q = $('user-q').value.trim();
  if (!q) { $('user-q').focus(); return; }
  await busy($('user-find'), async () => {
    const { users } = await api('GET', `/admin/v1/users?username=${encodeURIComponent(q)}`);
    fill($('user-results'), users.map((u) => el('li', { dataset: { user: u.id } },
      el('span', { class: 'item-main' },
        el('button', { type: 'button', class: 'linkish u-open', textContent: u.username, onclick: () => openUser(u.id) }),
        el('span', { class: 'item-meta' }, `${u.displayName} · ${u.id}${u.externalId ? ` · ${t('external {id}', { id: u.externalId })}` : ''}`)),
      u.admin ? el('span', { class: 'tag' }, 'admin') : null)),
    t('No username starts with “{q}”.', { q }));
  });
}

async function openUser(id, focus = true) {
  try {
    const d = await api('GET', `/admin/v1/users/${encodeURIComponent(id)}`);
    app.user = d.user;
    $('user-detail').hidden = false;
    $('user-detail').dataset.user = d.user.id;
    $('user-name').textContent = `${d.user.username}${d.user.admin ? ` (${t('admin')})` : ''}`;
    $('user-meta').textContent = t('{name} · user {id} · since {date}', { name: d.user.displayName, id: d.user.id, date: when(d.user.createdAt) });
    const base = `/admin/v1/users/${encodeURIComponent(d.user.id)}`;
    fill($('user-passkeys'), d.passkeys.map((p) => el('li', { dataset: { id: p.id } },
      el('span', { class: 'item-main' },
        el('span', { class: 'item-title' }, p.name, providerIcon(p), el('span', { class: 'tag' }, p.provider || t('Passkey')),
          p.flagged ? el('span', { class: 'tag tag-warn' }, t('possible clone')) : null),
        el('span', { class: 'item-meta' }, t('created {created} · last used {used} · {backup}', { created: when(p.createdAt), used: when(p.lastUsedAt), backup: p.backedUp ? t('synced') : t('device-bound') }))),
      el('button', { type: 'button', class: 'btn btn-small btn-remove pk-revoke', textContent: t('Revoke'), 'aria-label': t('Revoke passkey {name}', { name: p.name }),
        onclick: (ev) => revoke(ev.currentTarget, `${base}/passkeys/${encodeURIComponent(p.id)}`,
          t('Revoke {user}’s passkey “{name}” (and the sessions it began)', { user: d.user.username, name: p.name })) }))),
    t('No passkeys.'));
    fill($('user-devicekeys'), d.deviceKeys.map((k) => el('li', { dataset: { id: k.id } },
      el('span', { class: 'item-main' },
        el('span', { class: 'item-title' }, `${k.name} (${k.platform})`,
          el('span', { class: k.attested ? 'tag tag-ok' : 'tag tag-warn' }, k.attested ? t('attested: {level}', { level: k.attestation.securityLevel }) : t('not attested'))),
        el('span', { class: 'item-meta' }, `${t('device {id}', { id: k.deviceId })} · ${k.attestation.format}${k.attestation.app ? ` · ${t('app {app}', { app: k.attestation.app })}` : ''} · ${t('enrolled {date}', { date: when(k.createdAt) })}`)),
      el('button', { type: 'button', class: 'btn btn-small btn-remove dk-revoke', textContent: t('Revoke'), 'aria-label': t('Revoke device key {name}', { name: k.name }),
        onclick: (ev) => revoke(ev.currentTarget, `${base}/device-keys/${encodeURIComponent(k.id)}`, t('Revoke {user}’s device key “{name}”', { user: d.user.username, name: k.name })) }))),
    t('No device keys.'));
    fill($('user-sessions'), d.sessions.map((s) => el('li', { dataset: { id: s.id } },
      el('span', { class: 'item-main' }, el('span', { class: 'item-title' }, t('{method} session', { method: s.method })),
        el('span', { class: 'item-meta' }, t('signed in {auth} · last used {used}', { auth: when(s.authTime), used: when(s.lastUsedAt) }))),
      el('button', { type: 'button', class: 'btn btn-small btn-remove s-end', textContent: t('End'), 'aria-label': t('End this session'),
        onclick: (ev) => revoke(ev.currentTarget, `${base}/sessions/${encodeURIComponent(s.id)}`, t('End one of {user}’s sessions', { user: d.user.username })) }))),
    t('No live sessions.'));
    $('user-ticket-shown').hidden = true;
    $('user-ticket').dataset.user = d.user.id;
    if (focus) $('user-name').focus();
  } catch (e) { if (!told(e)) showBanner(describe(e), e.code || ''); }
}

/**
 * A one-time enrolment link for an account that lost every way in.
 * The passkey it registers is held, and the account's verified address hears of it.
 */
async function issueAccountTicket() {
  const button = $('user-ticket');
  const user = app.user;
  if (!user) return;
  await busy(button, async () => {
    const path = `/admin/v1/accounts/${encodeURIComponent(user.id)}/enrolment-tickets`;
    const r = await change('POST', path, undefined, t('Issue a one-time enrolment link for {user}', { user: user.username }));
    if (r === false) { button.focus(); return; }
    const link = `${location.origin}/?ticket=${encodeURIComponent(r.ticket)}`;
    $('user-ticket-link').textContent = link;
    $('user-ticket-until').textContent = t('It works once, until {date}.', { date: when(r.expiresAt) });
    $('user-ticket-shown').hidden = false;
    document.body.dataset.accountTicket = 'issued';
    $('user-ticket-shown').focus();
  });
}

async function revoke(button, path, summary) {
  await busy(button, async () => {
    const r = await change('DELETE', path, undefined, summary);
    if (r === false) { button.focus(); return; }
    await openUser(app.user.id);
    announce(t('Done.'));
  });
}

// --- Audit log

/** Entries per page; "Older entries" asks for the next page before the oldest one shown. */
const AUDIT_PAGE = 100;

/** What a line's approval was, from the detail it carries: a step-up's receipt and method, an admin change's action hash. */
function approvalText(detail) {
  if (!detail || typeof detail !== 'object') return '';
  const parts = [];
  if (detail.receiptId) parts.push(t('receipt {receipt}', { receipt: detail.receiptId }));
  if (detail.actionHash) parts.push(t('action {hash}', { hash: detail.actionHash }));
  if (detail.method) parts.push(t('by {method}', { method: detail.method === 'passkey' ? t('passkey') : detail.method === 'device-key' ? t('device key') : detail.method }));
  return parts.join(' · ');
}

function auditRow(e) {
  // Each cell carries its column's heading (in the page's language): a phone shows the rows stacked, labelled.
  const label = [...document.querySelectorAll('table.audit thead th')].map((th) => th.textContent.trim());
  const cell = (i, props, ...children) => el('td', { ...props, dataset: { label: label[i] || '' } }, ...children);
  return el('tr', { dataset: { action: e.action, actor: e.actor, id: String(e.id) } },
    cell(0, {}, when(e.at)),
    cell(1, {}, e.actorUsername ? `${e.actorUsername} (${e.actor})` : e.actor),
    cell(2, {}, el('code', {}, e.action)),
    cell(3, {}, e.subject || ''),
    cell(4, { class: 'approval' }, approvalText(e.detail)));
}

/** The filter as query parameters (a username is looked up; anything else is taken as a user id). */
async function auditFilter() {
  const params = new URLSearchParams({ limit: String(AUDIT_PAGE) });
  const who = $('audit-user').value.trim();
  const action = $('audit-action').value.trim();
  if (who) {
    const { users } = await api('GET', `/admin/v1/users?username=${encodeURIComponent(who)}`).catch(() => ({ users: [] }));
    const exact = users.find((u) => u.username === who);
    params.set('user', exact ? exact.id : who);
  }
  if (action) params.set('action', action);
  return params;
}

/** The newest page for the filter (the form, the tab), or with `older` the page before the last row shown. */
async function loadAudit(event, { older = false } = {}) {
  if (event) event.preventDefault();
  const rowsEl = $('audit-rows');
  const params = older && app.auditParams ? new URLSearchParams(app.auditParams) : await auditFilter();
  app.auditParams = params.toString();
  if (older) params.set('before', String(app.auditOldest));
  const { entries } = await api('GET', `/admin/v1/audit?${params}`);
  const rows = entries.map(auditRow);
  if (older) rowsEl.append(...rows);
  else rowsEl.replaceChildren(...(rows.length ? rows : [el('tr', {}, el('td', { colSpan: 5 }, t('No entries match.')))]));
  if (entries.length) app.auditOldest = entries[entries.length - 1].id;
  const shown = rowsEl.querySelectorAll('tr[data-id]').length;
  rowsEl.dataset.count = String(shown);
  // A full page may have more behind it; a short one is the end of the log.
  $('audit-more').hidden = entries.length < AUDIT_PAGE;
  rowsEl.dataset.end = entries.length < AUDIT_PAGE ? 'true' : 'false';
}

// --- Webhooks (docs/webhooks.md; the API may not be on this server yet)

const EVENTS = ['user.created', 'passkey.created', 'passkey.renamed', 'passkey.revoked', 'passkey.clone_suspected',
  'passkey.backup_eligibility_changed', 'device_key.enrolled', 'device_key.revoked', 'step_up.approved', 'session.revoked',
  'email.verified', 'recovery.started', 'recovery.completed', 'recovery.cancelled', 'oauth.authorized', 'oauth.denied',
  'approval.requested', 'approval.approved', 'approval.vetoed', 'approval.expired', 'approval.break_glass'];

async function loadWebhooks() {
  const r = await request('GET', '/admin/v1/webhooks');
  const unavailable = r.status === 404;
  $('webhooks-unavailable').hidden = !unavailable;
  $('webhooks-available').hidden = unavailable;
  $('page-webhooks').dataset.state = unavailable ? 'unavailable' : 'available';
  if (unavailable) return;
  if (!r.ok) throw new LatchkeyError((r.json && r.json.code) || 'invalid_request', (r.json && r.json.detail) || `HTTP ${r.status}`, { status: r.status, problem: r.json });
  const box = $('webhook-events');
  if (!box.querySelector('input')) {
    for (const name of EVENTS) {
      const id = `ev-${name.replace(/\W/g, '-')}`;
      box.append(el('label', { for: id }, el('input', { type: 'checkbox', id, value: name }), ` ${name}`));
    }
  }
  const hooks = r.json.webhooks || [];
  fill($('webhooks'), hooks.map((h) => {
    const deliveries = el('ul', { class: 'list deliveries' });
    return el('li', { dataset: { id: h.id } },
      el('span', { class: 'item-main' }, el('span', { class: 'item-title' }, h.url),
        el('span', { class: 'item-meta' }, h.events.join(', ')), deliveries),
      el('span', {},
        el('button', { type: 'button', class: 'btn btn-small btn-quiet', textContent: t('Deliveries'),
          onclick: () => loadDeliveries(h.id, deliveries) }),
        el('button', { type: 'button', class: 'btn btn-small btn-remove w-remove', textContent: t('Delete'), 'aria-label': t('Delete webhook {url}', { url: h.url }),
          onclick: (ev) => deleteWebhook(ev.currentTarget, h) })));
  }), t('No endpoints.'));
}

async function loadDeliveries(id, list) {
  try {
    const { deliveries } = await api('GET', `/admin/v1/webhooks/${encodeURIComponent(id)}/deliveries?limit=20`);
    fill(list, deliveries.map((d) => el('li', {}, `${d.type} · ${d.status} · ${t('{n} attempt(s)', { n: i18n.number(d.attempts) })}`
      + `${d.lastStatusCode ? ` · ${t('last {status}', { status: d.lastStatusCode })}` : ''}${d.nextAttemptAt ? ` · ${t('next {date}', { date: when(d.nextAttemptAt) })}` : ''}`)), t('No deliveries yet.'));
  } catch (e) { showBanner(describe(e), e.code || ''); }
}

async function addWebhook(event) {
  event.preventDefault();
  const url = $('webhook-url').value.trim();
  const events = [...$('webhook-events').querySelectorAll('input:checked')].map((i) => i.value);
  await busy($('webhook-add'), async () => {
    const r = await change('POST', '/admin/v1/webhooks', { url, events }, t('Send {events} events to {url}', { events: events.join(', '), url }));
    if (r === false) return;
    $('webhook-secret').hidden = false;
    $('webhook-secret').textContent = t('Signing secret (shown once): {secret}', { secret: r.secret });
    await loadWebhooks();
  });
}

async function deleteWebhook(button, hook) {
  await busy(button, async () => {
    const r = await change('DELETE', `/admin/v1/webhooks/${encodeURIComponent(hook.id)}`, undefined, t('Delete the webhook to {url}', { url: hook.url }));
    if (r === false) { button.focus(); return; }
    await loadWebhooks();
  });
}

// --- OpenID clients (docs/oidc.md): adding one or a redirect URI is a weakening change

async function loadClients() {
  const { clients } = await api('GET', '/admin/v1/clients');
  fill($('clients'), clients.map((c) => el('li', { dataset: { id: c.id } },
    el('span', { class: 'item-main' }, el('span', { class: 'item-title' }, c.name),
      el('span', { class: 'item-meta' }, `${c.id} · ${c.public ? 'public' : 'confidential'} · ${c.tokenEndpointAuthMethod}`),
      el('span', { class: 'item-meta' }, c.redirectUris.join(' ')),
      c.authorizationDetailsTypes.length ? el('span', { class: 'item-meta' }, `authorization_details: ${c.authorizationDetailsTypes.join(', ')}`) : null),
    el('button', { type: 'button', class: 'btn btn-small btn-remove', textContent: 'Remove', 'aria-label': `Remove client ${c.name}`,
      onclick: (ev) => removeClient(ev.currentTarget, c) }))), 'No clients.');
}

async function addClient(event) {
  event.preventDefault();
  const body = {
    name: $('client-name').value.trim(),
    redirectUris: $('client-redirects').value.split('\n').map((s) => s.trim()).filter(Boolean),
    public: $('client-public').checked,
    authorizationDetailsTypes: $('client-types').value.split(',').map((s) => s.trim()).filter(Boolean),
  };
  await busy($('client-add'), async () => {
    const r = await change('POST', '/admin/v1/clients', body, `Register the OpenID client "${body.name}" redirecting to ${body.redirectUris.join(', ')}`);
    if (r === false) return;
    $('client-secret').hidden = false;
    $('client-secret').textContent = r.clientSecret ? `client_id ${r.id} · client_secret (shown once): ${r.clientSecret}` : `client_id ${r.id} (public: no secret)`;
    await loadClients();
  });
}

async function removeClient(button, c) {
  await busy(button, async () => {
    const r = await change('DELETE', `/admin/v1/clients/${encodeURIComponent(c.id)}`, undefined, `Remove the OpenID client "${c.name}" and end its sessions`);
    if (r === false) { button.focus(); return; }
    await loadClients();
  });
}

// ---------------------------------------------------------------------------------------------

async function init() {
  lk.language = await i18n.init();
  i18n.switcher($('language'));
  $('banner-close').addEventListener('click', clearBanner);
  $('signin').addEventListener('click', (ev) => busy(ev.currentTarget, signIn));
  $('enrol').addEventListener('click', (ev) => busy(ev.currentTarget, enrol));
  $('signout').addEventListener('click', signOut);
  $('refused-signout').addEventListener('click', signOut);
  for (const tab of document.querySelectorAll('.tab')) {
    tab.addEventListener('click', () => { clearBanner(); showPage(tab.dataset.page).then(() => $(`${tab.dataset.page}-title`).focus()); });
  }
  $('origin-form').addEventListener('submit', addOrigin);
  $('fp-form').addEventListener('submit', addFingerprint);
  $('fp-input').addEventListener('input', showFingerprintOrigin);
  for (const id of ['ios-team', 'ios-bundle']) $(id).addEventListener('input', () => schedulePreview(iosDeclaration()));
  for (const id of ['android-package', 'android-fps']) $(id).addEventListener('input', () => schedulePreview(androidDeclaration()));
  $('ios-form').addEventListener('submit', (ev) => addApp(ev, iosDeclaration(), $('ios-add'), () => { $('ios-team').value = ''; $('ios-bundle').value = ''; }));
  $('android-form').addEventListener('submit', (ev) => addApp(ev, androidDeclaration(), $('android-add'),
    () => { $('android-package').value = ''; $('android-fps').value = ''; }));
  $('user-form').addEventListener('submit', findUsers);
  $('user-ticket').addEventListener('click', issueAccountTicket);
  $('audit-form').addEventListener('submit', (ev) => loadAudit(ev).catch((e) => showBanner(describe(e), e.code || '')));
  $('audit-more').addEventListener('click', () => busy($('audit-more'), () => loadAudit(null, { older: true })));
  $('webhook-form').addEventListener('submit', addWebhook);
  $('client-form').addEventListener('submit', addClient);
  $('quorum-note-close').addEventListener('click', clearQuorumNote);
  $('quorum-note-open').addEventListener('click', () => {
    clearBanner();
    showPage('approvals').then(() => $('approvals-title').focus());
  });

  browserSupport().then((support) => { if (!support.supported) showBanner(support.problem.message, support.problem.code); });
  const start = lk.session && !ticketFromURL() ? enter().catch(() => showSignIn()) : Promise.resolve(showSignIn());
  start.finally(() => { document.body.dataset.ready = 'true'; });
}

init();
