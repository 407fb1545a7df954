// Times as a person reads them, in one zone the person chooses (UTC or
// the browser's own, remembered in this browser), every absolute time
// with its zone's name: "Dec 6, 14:05 UTC", never a bare "14:05". Cron
// expressions run in UTC on the daemon: their next runs are shown in UTC,
// with the chosen zone beside when it differs.

const KEY = 'studio.timezone';

/** @typedef {'local' | 'utc'} ZoneSetting */

/** @type {ZoneSetting | null} the setting, read once from storage */
let setting = null;

/** The chosen zone: 'utc' or 'local' (the default). @returns {ZoneSetting} */
export function zoneSetting() {
  if (setting === null) {
    let stored = null;
    try { stored = globalThis.localStorage ? localStorage.getItem(KEY) : null; } catch { /* no storage */ }
    setting = stored === 'utc' ? 'utc' : 'local';
  }
  return setting;
}

/** Chooses the zone and remembers it in this browser. @param {ZoneSetting} z */
export function setZoneSetting(z) {
  setting = z === 'utc' ? 'utc' : 'local';
  try { localStorage.setItem(KEY, setting); } catch { /* no storage */ }
}

/** Whether times show in UTC. */
export function isUTC() {
  return zoneSetting() === 'utc';
}

/** The IANA zone times are shown in (undefined: the browser's). @param {ZoneSetting} [z] */
function tzOf(z = zoneSetting()) {
  return z === 'utc' ? 'UTC' : undefined;
}

/** The browser's own zone, by its IANA name ("Europe/Paris"). */
export function localZoneName() {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || 'local time';
  } catch {
    return 'local time';
  }
}

/**
 * The short name of the zone a time is shown in ("UTC", "CET", "GMT+1"),
 * at that time (daylight saving changes it).
 * @param {number} [ts] Unix seconds @param {ZoneSetting} [z]
 */
export function zoneAbbr(ts = Date.now() / 1000, z = zoneSetting()) {
  if (z === 'utc') return 'UTC';
  try {
    const part = new Intl.DateTimeFormat(undefined, { timeZoneName: 'short' }).formatToParts(new Date(ts * 1000)).find((p) => p.type === 'timeZoneName');
    return part ? part.value : localZoneName();
  } catch {
    return localZoneName();
  }
}

/**
 * The date and time, with seconds and the zone.
 * @param {number | null | undefined} ts Unix seconds @param {ZoneSetting} [z]
 */
export function fmtTime(ts, z) {
  if (ts === null || ts === undefined) return '—';
  return new Intl.DateTimeFormat(undefined, {
    year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit',
    timeZone: tzOf(z), timeZoneName: 'short',
  }).format(new Date(ts * 1000));
}

/** The calendar day of a time in a zone, for comparing days. @param {number} ts @param {ZoneSetting} [z] */
function dayOf(ts, z) {
  return new Intl.DateTimeFormat('en-CA', { year: 'numeric', month: '2-digit', day: '2-digit', timeZone: tzOf(z) }).format(new Date(ts * 1000));
}

/**
 * A time short enough for a list row, with its zone: the time of day when
 * it is today, the day and time this year, the date before.
 * @param {number | null | undefined} ts Unix seconds @param {number} [now] Unix seconds @param {ZoneSetting} [z]
 */
export function fmtShort(ts, now = Date.now() / 1000, z) {
  if (ts === null || ts === undefined) return '—';
  const d = new Date(ts * 1000);
  const tz = tzOf(z);
  if (dayOf(ts, z) === dayOf(now, z)) return new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', timeZone: tz, timeZoneName: 'short' }).format(d);
  if (dayOf(ts, z).slice(0, 4) === dayOf(now, z).slice(0, 4)) {
    return new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', timeZone: tz, timeZoneName: 'short' }).format(d);
  }
  return new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'short', day: 'numeric', timeZone: tz }).format(d);
}

/**
 * The hour and minute only ("14:05"), for a chart's axis: the chart says
 * its zone once.
 * @param {number} ts Unix seconds @param {ZoneSetting} [z]
 */
export function fmtClock(ts, z) {
  return new Intl.DateTimeFormat('en-GB', { hour: '2-digit', minute: '2-digit', hourCycle: 'h23', timeZone: tzOf(z) }).format(new Date(ts * 1000));
}

/**
 * A cron run's time: in UTC (the cron's own zone), and in the chosen zone
 * beside it when that is not UTC: "Mon, Dec 7, 04:00 UTC (05:00 CET)".
 * @param {number} ts Unix seconds @param {ZoneSetting} [z]
 */
export function fmtCronTime(ts, z = zoneSetting()) {
  const d = new Date(ts * 1000);
  const utc = new Intl.DateTimeFormat(undefined, { weekday: 'short', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', timeZone: 'UTC', timeZoneName: 'short' }).format(d);
  if (z === 'utc') return utc;
  const local = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', timeZoneName: 'short' }).format(d);
  const sameDay = dayOf(ts, 'utc') === dayOf(ts, 'local');
  const localDay = sameDay ? '' : new Intl.DateTimeFormat(undefined, { weekday: 'short', month: 'short', day: 'numeric' }).format(d) + ', ';
  return zoneAbbr(ts, 'local') === 'UTC' ? utc : `${utc} (${localDay}${local})`;
}

/**
 * How long ago (or how soon) in words: "5 minutes ago", "in 2 hours".
 * @param {number | null | undefined} ts Unix seconds
 */
export function fmtRelative(ts) {
  if (ts === null || ts === undefined) return '—';
  const s = Math.round(Date.now() / 1000 - ts);
  const abs = Math.abs(s);
  const unit = abs < 60 ? [s, 'second'] : abs < 3600 ? [Math.round(s / 60), 'minute'] : abs < 86400 ? [Math.round(s / 3600), 'hour'] : [Math.round(s / 86400), 'day'];
  try {
    return new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' }).format(-unit[0], /** @type {Intl.RelativeTimeFormatUnit} */ (unit[1]));
  } catch {
    return fmtTime(ts);
  }
}
