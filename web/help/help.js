// The help pages: the page's words in the reader's language (web/i18n.js), nothing else.
import * as i18n from '/i18n.js';

async function init() {
  await i18n.init();
  i18n.switcher(document.getElementById('language'));
  document.body.dataset.ready = 'true';
}

document.addEventListener('DOMContentLoaded', init);
