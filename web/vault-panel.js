// The web app's vault panel (docs/vault.md): a note encrypted in this browser with the account's
// data key, which only the account's passkeys (their PRF output, user verification required) and
// the vault recovery key unwrap. Everything cryptographic is latchkey.js's `lk.vault`; this file is
// the panel's words and DOM.
//
// Where the note lives: Latchkey stores the vault's salt and wrapped keys only (ciphertext of the
// data key, never data encrypted under it), so the note's ciphertext stays in this browser's
// localStorage, one entry per account. The server never receives it, nor the note, the PRF output,
// the data key or the vault recovery key.
import { LatchkeyError, isUnfinishedVault } from './latchkey.js';

const N_ = (text) => text;
const NOTE_KEY = (user) => `latchkey.vault.note.${user.id || user.username}`;

/** Why each vault change asks for a passkey (shown while the step-up prompt is up). */
export const VAULT_WHY = {
  wrap: N_('To let a passkey open your vault, approve with one of your passkeys: a stolen sign-in alone must not be able to change who opens it.'),
  recovery: N_('To store your vault’s recovery key (wrapped, never the key itself), approve with your passkey.'),
};

/**
 * The panel. `deps`: the app's one client (`lk`), translation (`t`), its banner and busy helpers,
 * and `showError(error, context)` for failures that are not the vault's own.
 */
export function createVaultPanel({ lk, t, $, showBanner, clearBanner, showError, busy, announce }) {
  const state = { vault: null, open: null, pending: [] };
  const body = document.body.dataset;

  function show(which) {
    $('vault').hidden = false;
    $('vault-none').hidden = which !== 'none';
    $('vault-locked').hidden = which !== 'locked';
    $('vault-open').hidden = which !== 'open';
    $('vault-lock').hidden = which !== 'open';
    body.vault = which;
  }

  /** The vault's own failures in words; anything else goes to the app's messages. */
  function fail(e) {
    const code = e instanceof LatchkeyError ? e.code : 'unknown';
    if (code === 'vault_locked') {
      showBanner(t('That key does not open your vault. Check the vault recovery key, or use another passkey.'), 'error', 'vault_locked');
    } else if (code === 'not_supported' && !e.status && !e.cause) {
      showBanner(t('This passkey cannot open a vault: it does not support the PRF extension. Use another passkey.'), 'error', 'vault_no_prf');
    } else if (code === 'invalid_request' && !e.status) {
      showBanner(t('A vault recovery key is 52 letters and digits. Check what you typed.'), 'error', 'vault_code_invalid');
    } else {
      showError(e, 'vault');
    }
  }

  /** Reads `GET /v1/vault` and shows the panel for it (the open vault stays open). */
  async function load() {
    if (!lk.session) return;
    try { state.vault = await lk.vault.get(); } catch (e) { if (lk.session) fail(e); return; }
    if (!lk.session) return;
    // No vault, or one whose creation was cancelled before any key was stored: "Create" finishes it.
    if (!state.vault || isUnfinishedVault(state.vault, lk.session)) { state.open = null; show('none'); return; }
    if (state.open) { show('open'); return; }
    showLocked();
  }

  function showLocked() {
    const v = state.vault;
    const recovered = lk.session && lk.session.method === 'recovery';
    const byKey = Boolean(v.recovery) && (recovered || v.wrapped.length === 0);
    $('vault-locked-text').textContent = recovered && v.recovery
      ? t('You recovered your account, so your vault needs your vault recovery key once: it then opens with your new passkey.')
      : v.wrapped.length ? t('Your vault is locked.')
        : v.recovery ? t('None of your passkeys opens this vault yet. Open it with your vault recovery key.')
          : t('None of your passkeys opens this vault, and this sign-in cannot use the vault recovery key. Sign in with a passkey that opens it.');
    $('vault-unlock').hidden = v.wrapped.length === 0;
    // After a recovery the key is the way in; the passkey button stays for one that was not lost.
    $('vault-unlock').classList.toggle('btn-primary', !byKey);
    $('vault-unlock').classList.toggle('btn-secondary', byKey);
    $('vault-use-key').hidden = !v.recovery || byKey;
    $('vault-recover-form').hidden = !byKey;
    show('locked');
  }

  function showOpen() {
    const stored = localStorage.getItem(NOTE_KEY(lk.user));
    $('vault-note').value = '';
    $('vault-note-state').textContent = stored ? '' : t('Nothing saved yet.');
    show('open');
    if (!stored) return Promise.resolve();
    return state.open.decryptText(JSON.parse(stored).sealed).then((text) => {
      $('vault-note').value = text;
      $('vault-note-state').textContent = t('Decrypted in this browser.');
      body.vaultNote = 'read';
    });
  }

  async function create() {
    clearBanner();
    await busy($('vault-create'), t('Waiting for your passkey…'), async () => {
      try {
        state.open = await lk.vault.create({ reason: VAULT_WHY.wrap });
        await makeRecoveryKey();
        state.vault = await lk.vault.get();
        await showOpen();
        announce(t('Your vault is ready.'));
        $('vault-note').focus();
      } catch (e) { fail(e); await load(); }
    });
  }

  /** A new vault recovery key, shown once beside the recovery codes; only its wrap is sent. */
  async function makeRecoveryKey() {
    const code = await lk.vault.makeRecoveryKey(state.open, { reason: VAULT_WHY.recovery });
    clearBanner();
    const out = $('vault-key-code');
    out.replaceChildren(...code.match(/.{1,4}/g).map((group) => {
      const span = document.createElement('span');
      span.textContent = group;
      return span;
    }));
    $('vault-key-shown').hidden = false;
    body.vaultKey = 'shown';
    $('vault-key-shown').scrollIntoView({ block: 'center' });
  }

  async function newRecoveryKey() {
    clearBanner();
    await busy($('vault-new-key'), t('Waiting for your passkey…'), async () => {
      try { await makeRecoveryKey(); $('vault-key-shown').focus(); } catch (e) { fail(e); }
    });
  }

  async function unlock() {
    clearBanner();
    await busy($('vault-unlock'), t('Waiting for your passkey…'), async () => {
      try {
        state.open = await lk.vault.unlock();
        await wrapPending();
        await showOpen();
        announce(t('Your vault is open.'));
        $('vault-note').focus();
      } catch (e) { fail(e); }
    });
  }

  /** After an account recovery: the written-down key opens the vault, which is then wrapped for this session's passkey. */
  async function recover(event) {
    event.preventDefault();
    clearBanner();
    const code = $('vault-recovery-code').value;
    if (!code.trim()) { $('vault-recovery-code').focus(); return; }
    await busy($('vault-recover'), t('Opening…'), async () => {
      try {
        const open = await lk.vault.recover(code);
        state.open = open;
        $('vault-recover-form').reset();
        const current = (await lk.sessions.list()).find((s) => s.current);
        const wrapped = new Set(state.vault.wrapped.map((w) => w.credentialId));
        if (current && current.credentialId && !wrapped.has(current.credentialId)) {
          await lk.vault.addPasskey(open, current.credentialId, { reason: VAULT_WHY.wrap });
          body.vaultRewrapped = 'yes';
        }
        state.vault = await lk.vault.get();
        await showOpen();
        announce(t('Your vault is open, and your new passkey opens it from now on.'));
        $('vault-note').focus();
      } catch (e) { fail(e); $('vault-recovery-code').focus(); }
    });
  }

  async function save(event) {
    event.preventDefault();
    if (!state.open) return;
    clearBanner();
    await busy($('vault-save'), t('Encrypting…'), async () => {
      const sealed = await state.open.encrypt($('vault-note').value);
      localStorage.setItem(NOTE_KEY(lk.user), JSON.stringify({ sealed }));
      $('vault-note-state').textContent = t('Encrypted and saved in this browser.');
      body.vaultNote = 'saved';
      announce(t('Encrypted and saved in this browser.'));
    });
  }

  function lock() {
    state.open = null;
    $('vault-note').value = '';
    delete body.vaultNote;
    if (state.vault) showLocked();
    $('vault-title').focus();
  }

  /** Wraps the data key for passkeys added while the vault was locked, once it is open. */
  async function wrapPending() {
    while (state.pending.length) {
      const id = state.pending[0];
      await lk.vault.addPasskey(state.open, id, { reason: VAULT_WHY.wrap });
      state.pending.shift();
    }
  }

  /** "Adding a passkey wraps the data key for it": now when the vault is open, else at its next unlock. */
  async function passkeyAdded(credentialId) {
    if (!state.vault || !credentialId) return;
    if (!state.open) {
      state.pending.push(credentialId);
      showBanner(t('Unlock your vault once so that your new passkey can open it too.'), 'info', 'vault_wrap_pending');
      return;
    }
    try {
      await lk.vault.addPasskey(state.open, credentialId, { reason: VAULT_WHY.wrap });
      clearBanner();
      state.vault = await lk.vault.get();
      body.vaultWrapped = String(state.vault.wrapped.length);
      announce(t('Your new passkey opens your vault too.'));
    } catch (e) {
      state.pending.push(credentialId);
      fail(e);
    }
  }

  /** Signed out: forget the open vault and the shown key. */
  function reset() {
    state.vault = null;
    state.open = null;
    state.pending = [];
    $('vault').hidden = true;
    $('vault-note').value = '';
    $('vault-key-code').replaceChildren();
    $('vault-key-shown').hidden = true;
    for (const k of ['vault', 'vaultNote', 'vaultKey', 'vaultWrapped', 'vaultRewrapped']) delete body[k];
  }

  $('vault-create').addEventListener('click', create);
  $('vault-unlock').addEventListener('click', unlock);
  $('vault-use-key').addEventListener('click', () => {
    $('vault-use-key').hidden = true;
    $('vault-recover-form').hidden = false;
    $('vault-recovery-code').focus();
  });
  $('vault-recover-form').addEventListener('submit', recover);
  $('vault-open').addEventListener('submit', save);
  $('vault-new-key').addEventListener('click', newRecoveryKey);
  $('vault-lock').addEventListener('click', lock);
  return { load, reset, passkeyAdded };
}
