// The theme: light or dark, kept in localStorage, the system's preference
// until chosen. Changing it fires studio:theme so charts can redraw.

const KEY = 'studio.theme';

/** @returns {'light'|'dark'} */
export function storedTheme() {
  try {
    const t = localStorage.getItem(KEY);
    if (t === 'light' || t === 'dark') return t;
  } catch { /* no storage */ }
  return globalThis.matchMedia && matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light';
}

/** @param {string} theme */
export function applyTheme(theme) {
  document.documentElement.dataset.theme = theme;
  try { localStorage.setItem(KEY, theme); } catch { /* no storage */ }
  document.dispatchEvent(new CustomEvent('studio:theme', { detail: theme }));
}

export function currentTheme() {
  return document.documentElement.dataset.theme || 'light';
}
