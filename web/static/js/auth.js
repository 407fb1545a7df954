// Sign-in: `studio serve` prints http://127.0.0.1:8765/#token=... The token
// arrives in the fragment (never sent to the server, never in a query), is
// moved to sessionStorage at once and removed from the address bar, so it
// is not left in history, bookmarks or screenshots. Requests carry it only
// in the Authorization header.

const KEY = 'studio.token';

/**
 * Moves a #token=... fragment into sessionStorage and strips it from the URL.
 * @returns {boolean} whether a token was taken
 */
export function takeTokenFromFragment() {
  const hash = location.hash.startsWith('#') ? location.hash.slice(1) : '';
  if (!hash) return false;
  const params = new URLSearchParams(hash);
  const token = params.get('token');
  if (!token) return false;
  setToken(token);
  params.delete('token');
  const rest = params.toString();
  history.replaceState(history.state, '', location.pathname + location.search + (rest ? '#' + rest : ''));
  return true;
}

/** @returns {string | null} */
export function getToken() {
  try {
    return sessionStorage.getItem(KEY);
  } catch {
    return null;
  }
}

/** @param {string} token */
export function setToken(token) {
  sessionStorage.setItem(KEY, token.trim());
}

export function clearToken() {
  sessionStorage.removeItem(KEY);
}
