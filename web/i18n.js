// The pages' languages: English, German, Polish and Chinese (Simplified). One catalog per language
// (./i18n/<tag>.json, beside this module: /i18n/… for the app, /admin/i18n/… for the console),
// keyed by the English text, so a page marks nothing and a missing entry shows English.
//
// The language: the one chosen in the switcher (localStorage), else the first of
// navigator.languages this has a catalog for, else English. Dates and numbers go through Intl in
// that language. Tests/Browser/i18n_keys.py --check finds a key missing from any catalog.

export const LANGUAGES = Object.freeze([
  { tag: 'en', name: 'English' },
  { tag: 'de', name: 'Deutsch' },
  { tag: 'pl', name: 'Polski' },
  { tag: 'zh-Hans', name: '简体中文' },
]);
const STORE = 'latchkey.language';
const TEXT_ATTRS = ['aria-label', 'placeholder', 'title', 'alt'];

let lang = 'en';
let catalog = {};

/** The catalog tag for a BCP 47 tag, or null: de-AT → de, zh-CN / zh-SG / zh-Hans → zh-Hans (not zh-TW / zh-Hant). */
export function match(tag) {
  const t = String(tag || '').toLowerCase();
  if (!t) return null;
  if (t.startsWith('zh')) return /hant|-tw|-hk|-mo/.test(t) ? null : 'zh-Hans';
  const primary = t.split('-')[0];
  const hit = LANGUAGES.find((l) => l.tag.toLowerCase() === primary);
  return hit ? hit.tag : null;
}

/** The language this page should speak. */
export function choose(preferred = (globalThis.navigator && navigator.languages) || []) {
  try {
    const stored = localStorage.getItem(STORE);
    if (stored && LANGUAGES.some((l) => l.tag === stored)) return stored;
  } catch { /* no storage */ }
  for (const p of preferred) { const m = match(p); if (m) return m; }
  return 'en';
}

/**
 * Loads the catalog and translates the document; returns the language. `wanted` (a catalog tag)
 * is a language the server already chose for the page (the /authorize page's `display.lang`).
 */
export async function init(root = document, wanted = null) {
  lang = LANGUAGES.some((l) => l.tag === wanted) ? wanted : choose();
  if (lang !== 'en') {
    try {
      const r = await fetch(new URL(`./i18n/${lang}.json`, import.meta.url), { cache: 'no-cache' });
      if (r.ok) catalog = await r.json(); else lang = 'en';
    } catch { lang = 'en'; }
  }
  document.documentElement.lang = lang;
  translate(root);
  return lang;
}

/** The current language tag. */
export function language() { return lang; }

/** The text for `key` (its English text) in the current language, with `{name}` filled from `params`. */
export function t(key, params) {
  const text = (lang !== 'en' && catalog[key]) || key;
  return params ? text.replace(/\{(\w+)\}/g, (m, k) => (k in params ? String(params[k]) : m)) : text;
}

/** Translates the text nodes and text attributes under `root` (a template's content too). */
export function translate(root) {
  if (lang === 'en') return;
  const walk = (node) => {
    if (node.nodeType === 3) {
      const raw = node.nodeValue;
      const key = raw.replace(/\s+/g, ' ').trim();
      if (key && catalog[key]) node.nodeValue = raw.replace(/^(\s*)[\s\S]*?(\s*)$/, (_, a, b) => `${a}${catalog[key]}${b}`);
      return;
    }
    if (node.nodeType !== 1 && node.nodeType !== 9 && node.nodeType !== 11) return;
    if (node.nodeType === 1) {
      if (['SCRIPT', 'STYLE', 'CODE', 'PRE'].includes(node.tagName) || node.hasAttribute('data-i18n-skip')) return;
      for (const a of TEXT_ATTRS) {
        const v = node.getAttribute(a);
        if (v && catalog[v.trim()]) node.setAttribute(a, catalog[v.trim()]);
      }
      if (node.tagName === 'TEMPLATE') { walk(node.content); return; }
    }
    for (const child of node.childNodes) walk(child);
  };
  walk(root);
}

/** A date and time in the current language. */
export function dateTime(value) {
  const d = value instanceof Date ? value : new Date(value);
  if (Number.isNaN(d.getTime())) return String(value);
  return new Intl.DateTimeFormat(lang, { dateStyle: 'medium', timeStyle: 'short' }).format(d);
}

/** A date alone, in the current language. */
export function date(value) {
  const d = value instanceof Date ? value : new Date(value);
  if (Number.isNaN(d.getTime())) return String(value);
  return new Intl.DateTimeFormat(lang, { dateStyle: 'medium' }).format(d);
}

/** "5 minutes ago" / "in 2 hours", or the date beyond a day. */
export function relative(value, now = Date.now()) {
  const ms = value instanceof Date ? value.getTime() : Date.parse(value);
  if (Number.isNaN(ms)) return String(value);
  const seconds = (ms - now) / 1000;
  const abs = Math.abs(seconds);
  const rtf = new Intl.RelativeTimeFormat(lang, { numeric: 'auto' });
  if (abs < 60) return t('just now');
  if (abs < 3600) return rtf.format(Math.round(seconds / 60), 'minute');
  if (abs < 86400) return rtf.format(Math.round(seconds / 3600), 'hour');
  return dateTime(ms);
}

/** A number in the current language. */
export function number(n, options) { return new Intl.NumberFormat(lang, options).format(n); }

/**
 * Fills a <select> with the languages; choosing one stores it and reloads the page in it, or calls
 * `onChoose(tag)` instead of reloading when given (a page that must ask its server again).
 */
export function switcher(select, onChoose = null) {
  if (!select) return;
  select.replaceChildren(...LANGUAGES.map((l) => {
    const o = document.createElement('option');
    o.value = l.tag;
    o.lang = l.tag;
    o.textContent = l.name;
    o.selected = l.tag === lang;
    return o;
  }));
  select.addEventListener('change', () => {
    try { localStorage.setItem(STORE, select.value); } catch { /* this page only */ }
    if (onChoose) onChoose(select.value); else location.reload();
  });
}
