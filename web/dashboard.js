// The Sluice dashboard: polls /admin/stats once a second (same origin, no
// library) and shows the counts, the decision rates computed from successive
// polls, the top denied keys and the server's state. A failed poll marks the
// page disconnected and polling goes on, so the page picks the server up
// again after a restart.
//
// One chart per route: the decisions of each second of the last 15 minutes.
// When the page opens it loads all the server keeps (/admin/history), so a
// page opened after an incident shows it; each poll then asks for the
// seconds since the last one and moves the charts on. The data drawn is
// window.sluiceHistory: {end, routes: Map(name -> {allowed, denied, error})},
// 900 counts each, oldest first, for the seconds end - 900 ... end - 1.
//
// Everything a client can influence (keys, route names) is written with
// textContent, never as HTML.
//
// With admin_token_all the stats need "Authorization: Bearer <token>": the
// page takes the token from its URL fragment (/dashboard#token=..., never
// sent to the server or its logs) or from the form it shows on a 401, and
// keeps it in this tab's sessionStorage only.

const POLL_INTERVAL_MS = 1000;
const POLL_TIMEOUT_MS = 2000;
// The seconds a chart shows: all that /admin/history keeps.
const HISTORY_SECONDS = 900;
const RESULTS = [['allowed', '--allowed'], ['denied', '--denied'], ['error', '--error']];

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = 'sluice-admin-token';

function takeTokenFromFragment() {
  const match = /^#token=(.+)$/.exec(window.location.hash);
  if (match === null) return;
  sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
  // Out of the address bar and the history, where it could be copied.
  history.replaceState(null, '', window.location.pathname + window.location.search);
}

function authHeaders() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token === null ? {} : { Authorization: `Bearer ${token}` };
}

function askForToken(show) {
  $('token-form').hidden = !show;
}

// The previous successful poll: when it arrived and its counters, to turn
// counts into rates. Reset when the server restarts.
let previous = null;
// What the charts draw (see the top); `loaded` once the first answer of
// /admin/history is drawn.
const sluiceHistory = { end: null, routes: new Map(), loaded: false };
window.sluiceHistory = sluiceHistory;
// When the last answer of /admin/history arrived (performance.now() ms).
let historyAt = null;

function formatDuration(seconds) {
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  const pad = (n) => String(n).padStart(2, '0');
  return h > 0 ? `${h}h ${pad(m)}m ${pad(s)}s` : m > 0 ? `${m}m ${pad(s)}s` : `${s}s`;
}

function formatRate(perSecond) {
  return perSecond === null ? '–' : perSecond.toFixed(1);
}

function setConnection(connected, detail) {
  const el = $('connection');
  el.className = `connection ${connected ? 'connected' : 'disconnected'}`;
  el.textContent = connected ? 'Connected' : `Disconnected (${detail}); retrying every second`;
  document.body.classList.toggle('stale', !connected);
}

// Every row of the routes table: the routes, the default route and the
// named policies (their names start with "policy:").
function rowsOf(stats) {
  return [...stats.routes, ...stats.policies];
}

// Rates since the previous poll, or null when there is no comparable
// previous poll (first poll, server restarted, counters went back).
function computeRates(stats, now) {
  const counts = new Map(rowsOf(stats).map((r) => [r.route, r]));
  const before = previous;
  previous = { at: now, uptimeSeconds: stats.uptime_seconds, counts };
  if (before === null || stats.uptime_seconds < before.uptimeSeconds) return null;
  const seconds = (now - before.at) / 1000;
  const rates = { perRoute: new Map(), allowed: 0, denied: 0 };
  for (const [name, row] of counts) {
    const old = before.counts.get(name);
    if (old === undefined) continue;  // a route added by a reload: its rate from the next poll
    const allowed = row.allowed - old.allowed;
    const denied = row.denied - old.denied;
    const errors = row.errors - old.errors;
    if (allowed < 0 || denied < 0 || errors < 0) return null;  // a new process
    rates.perRoute.set(name, (allowed + denied + errors) / seconds);
    rates.allowed += allowed / seconds;
    rates.denied += denied / seconds;
  }
  return rates;
}

function cell(text, className) {
  const td = document.createElement('td');
  td.className = className;
  td.textContent = text;
  return td;
}

function renderRoutes(stats, rates) {
  const tbody = $('routes').tBodies[0];
  const rows = rowsOf(stats);
  // Rebuild only when the set of routes changed (a reload), so that a
  // screen reader or a selection is not disturbed every second.
  const names = rows.map((r) => r.route).join('\n');
  if (tbody.dataset.names !== names) {
    tbody.replaceChildren(
      ...rows.map((r) => {
        const tr = document.createElement('tr');
        tr.dataset.name = r.route;
        const th = document.createElement('th');
        th.scope = 'row';
        th.textContent = r.route;
        tr.append(th, cell('', 'number allowed'), cell('', 'number denied'),
          cell('', 'number errors'), cell('', 'number rate'));
        return tr;
      }),
    );
    tbody.dataset.names = names;
  }
  rows.forEach((r, i) => {
    const tr = tbody.rows[i];
    tr.querySelector('.allowed').textContent = String(r.allowed);
    tr.querySelector('.denied').textContent = String(r.denied);
    tr.querySelector('.errors').textContent = String(r.errors);
    const rate = rates?.perRoute.get(r.route);
    tr.querySelector('.rate').textContent = formatRate(rate === undefined ? null : rate);
  });
}

function renderTopKeys(stats) {
  const tbody = $('top-keys').tBodies[0];
  tbody.replaceChildren(
    ...stats.top_denied_keys.map((k) => {
      const tr = document.createElement('tr');
      tr.append(cell(k.key, 'key'), cell(String(k.count), 'number count'),
        cell(String(k.error), 'number error'));
      return tr;
    }),
  );
  $('no-keys').hidden = stats.top_denied_keys.length > 0;
}

function describeReloads(reloads) {
  let text = `${reloads.succeeded} succeeded, ${reloads.failed} failed`;
  const last = reloads.last;
  if (last !== null) {
    const at = new Date(last.unix_ms).toLocaleTimeString();
    text += last.ok
      ? `; last at ${at}: generation ${last.generation} in force`
      : `; last at ${at} refused: ${last.errors[0] ?? 'see the log'}`;
  }
  return text;
}

function renderServer(stats, rates) {
  $('version').textContent = stats.version;
  $('uptime').textContent = formatDuration(stats.uptime_seconds);
  $('store-backend').textContent = stats.store.backend;
  const ready = $('store-ready');
  ready.textContent = stats.store.ready ? 'ready' : 'not ready';
  ready.className = stats.store.ready ? 'ready' : 'not-ready';
  $('keys-held').textContent = String(stats.keys_held);
  $('generation').textContent = String(stats.generation);
  $('reloads').textContent = describeReloads(stats.reloads);
  $('total-rate').textContent = rates === null
    ? '–'
    : `${formatRate(rates.allowed)} allowed, ${formatRate(rates.denied)} denied`;
}

function emptySeries() {
  return Object.fromEntries(RESULTS.map(([field]) => [field, Array(HISTORY_SECONDS).fill(0)]));
}

// Takes in an answer of /admin/history: the charts move on to its `end`,
// and its seconds replace those they held. A route no longer in the answer
// has left the config; a new one starts with zeros before its seconds. An
// answer that ends before the last one (a server whose clock is behind)
// starts the charts afresh.
function mergeHistory(answer) {
  const fresh = sluiceHistory.end === null || answer.end < sluiceHistory.end;
  const shift = fresh ? HISTORY_SECONDS : Math.min(HISTORY_SECONDS, answer.end - sluiceHistory.end);
  const routes = new Map();
  for (const [name, counts] of Object.entries(answer.routes)) {
    const series = (fresh ? undefined : sluiceHistory.routes.get(name)) ?? emptySeries();
    for (const [field] of RESULTS) {
      const values = series[field];
      values.splice(0, shift);
      values.push(...Array(shift).fill(0));
      values.splice(HISTORY_SECONDS - counts[field].length, counts[field].length, ...counts[field]);
    }
    routes.set(name, series);
  }
  sluiceHistory.end = answer.end;
  sluiceHistory.routes = routes;
}

function drawChart(canvas, series) {
  const scale = window.devicePixelRatio || 1;
  const width = canvas.clientWidth || canvas.width;
  const height = canvas.clientHeight || canvas.height;
  if (canvas.width !== Math.round(width * scale)) canvas.width = Math.round(width * scale);
  if (canvas.height !== Math.round(height * scale)) canvas.height = Math.round(height * scale);
  const g = canvas.getContext('2d');
  g.setTransform(scale, 0, 0, scale, 0, 0);
  g.clearRect(0, 0, width, height);

  const style = getComputedStyle(document.documentElement);
  const color = (name) => style.getPropertyValue(name).trim();
  const pad = { left: 44, right: 8, top: 10, bottom: 20 };
  const plotW = width - pad.left - pad.right;
  const plotH = height - pad.top - pad.bottom;
  const peak = Math.max(1, ...RESULTS.map(([field]) => Math.max(...series[field])));
  // A round top for the scale: 1, 2 or 5 times a power of ten.
  const power = 10 ** Math.floor(Math.log10(peak));
  const top = [1, 2, 5, 10].map((m) => m * power).find((v) => v >= peak);
  const x = (i) => pad.left + plotW * (i / (HISTORY_SECONDS - 1));
  const y = (v) => pad.top + plotH * (1 - v / top);

  g.font = '11px system-ui, sans-serif';
  g.fillStyle = color('--muted');
  g.strokeStyle = color('--grid');
  g.lineWidth = 1;
  g.textAlign = 'right';
  g.textBaseline = 'middle';
  for (const v of [0, top / 2, top]) {
    g.beginPath();
    g.moveTo(pad.left, y(v));
    g.lineTo(width - pad.right, y(v));
    g.stroke();
    g.fillText(String(v), pad.left - 6, y(v));
  }
  g.textAlign = 'left';
  g.textBaseline = 'alphabetic';
  g.fillText('−15 min', pad.left, height - 5);
  g.textAlign = 'right';
  g.fillText('now', width - pad.right, height - 5);

  g.lineWidth = 1.5;
  // Store errors first: most seconds have none, and that line at zero
  // should not hide the others.
  for (const [field, name] of [...RESULTS].reverse()) {
    g.strokeStyle = color(name);
    g.beginPath();
    series[field].forEach((v, i) => (i === 0 ? g.moveTo(x(i), y(v)) : g.lineTo(x(i), y(v))));
    g.stroke();
  }
}

const sum = (values) => values.reduce((a, b) => a + b, 0);

// One panel per route, in the order of the answer (by name); rebuilt only
// when the set of routes changed.
function renderHistory() {
  const container = $('history');
  const names = [...sluiceHistory.routes.keys()];
  if (container.dataset.names !== names.join('\n')) {
    container.replaceChildren(...names.map((name) => {
      const panel = document.createElement('figure');
      panel.className = 'panel';
      panel.dataset.route = name;
      const caption = document.createElement('figcaption');
      caption.textContent = name;
      const canvas = document.createElement('canvas');
      canvas.width = 720;
      canvas.height = 140;
      canvas.setAttribute('role', 'img');
      panel.append(caption, canvas);
      return panel;
    }));
    container.dataset.names = names.join('\n');
  }
  $('no-history').hidden = names.length > 0;
  for (const panel of container.children) {
    const series = sluiceHistory.routes.get(panel.dataset.route);
    const canvas = panel.querySelector('canvas');
    drawChart(canvas, series);
    const [allowed, denied, error] = RESULTS.map(([field]) => sum(series[field]));
    canvas.setAttribute('aria-label', `Decisions per second of ${panel.dataset.route} over the `
      + `last 15 minutes: ${allowed} allowed, ${denied} denied, ${error} store errors`);
  }
}

async function pollHistory(signal) {
  const now = performance.now();
  // All the server keeps at first (and after a long outage), else the
  // seconds since the last answer and a margin.
  const seconds = historyAt === null ? HISTORY_SECONDS
    : Math.min(HISTORY_SECONDS, Math.ceil((now - historyAt) / 1000) + 2);
  const response = await fetch(`/admin/history?seconds=${seconds}`,
    { cache: 'no-store', signal, headers: authHeaders() });
  if (!response.ok) throw new Error(`HTTP ${response.status}`);
  mergeHistory(await response.json());
  historyAt = now;
  renderHistory();
  sluiceHistory.loaded = true;
}

function render(stats, now) {
  const rates = computeRates(stats, now);
  renderServer(stats, rates);
  renderRoutes(stats, rates);
  renderTopKeys(stats);
}

async function poll() {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), POLL_TIMEOUT_MS);
  let stats;
  try {
    const response = await fetch('/admin/stats',
      { cache: 'no-store', signal: abort.signal, headers: authHeaders() });
    askForToken(response.status === 401);
    if (response.status === 401) throw new Error('the admin token is needed');
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    stats = await response.json();
    await pollHistory(abort.signal);
  } catch (error) {
    const detail = error.name === 'AbortError' ? 'no answer'
      : error instanceof TypeError ? 'server unreachable' : error.message;
    setConnection(false, detail);
    previous = null;  // the next answer may come from a restarted server
    return;
  } finally {
    clearTimeout(timer);
    setTimeout(poll, POLL_INTERVAL_MS);
  }
  setConnection(true);
  render(stats, performance.now());
}

$('token-form').addEventListener('submit', (event) => {
  event.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $('token-input').value.trim());
  $('token-input').value = '';
  askForToken(false);
});

takeTokenFromFragment();
poll();
