// The Sluice dashboard: polls /admin/stats once a second (same origin, no
// library) and shows the counts, the decision rates computed from successive
// polls, a chart of the last minutes, the top denied keys and the server's
// state. A failed poll marks the page disconnected and polling goes on, so
// the page picks the server up again after a restart.
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
const CHART_WINDOW_MS = 3 * 60 * 1000;
// Two samples further apart than this are not joined by a line in the chart
// (the server was unreachable in between).
const CHART_GAP_MS = 2500;

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
// Chart samples: {at (performance.now() ms), allowed, denied} per second.
const samples = [];

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

function drawChart(now) {
  const canvas = $('chart');
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
  const peak = Math.max(1, ...samples.map((s) => Math.max(s.allowed, s.denied)));
  // A round top for the scale: 1, 2 or 5 times a power of ten.
  const power = 10 ** Math.floor(Math.log10(peak));
  const top = [1, 2, 5, 10].map((m) => m * power).find((v) => v >= peak);
  const x = (at) => pad.left + plotW * (1 - (now - at) / CHART_WINDOW_MS);
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
  g.fillText('−3 min', pad.left, height - 5);
  g.textAlign = 'right';
  g.fillText('now', width - pad.right, height - 5);

  g.lineWidth = 2;
  for (const [field, name] of [['allowed', '--allowed'], ['denied', '--denied']]) {
    g.strokeStyle = color(name);
    g.beginPath();
    let last = null;
    for (const s of samples) {
      if (last === null || s.at - last.at > CHART_GAP_MS) g.moveTo(x(s.at), y(s[field]));
      else g.lineTo(x(s.at), y(s[field]));
      last = s;
    }
    g.stroke();
  }

  const latest = samples[samples.length - 1];
  canvas.setAttribute('aria-label', latest === undefined
    ? 'Chart of allowed and denied decisions per second: no data yet'
    : `Chart of allowed and denied decisions per second over the last 3 minutes; latest ${formatRate(latest.allowed)} allowed and ${formatRate(latest.denied)} denied per second`);
}

function render(stats, now) {
  const rates = computeRates(stats, now);
  if (rates !== null) samples.push({ at: now, allowed: rates.allowed, denied: rates.denied });
  while (samples.length > 0 && now - samples[0].at > CHART_WINDOW_MS) samples.shift();
  renderServer(stats, rates);
  renderRoutes(stats, rates);
  renderTopKeys(stats);
  drawChart(now);
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
  } catch (error) {
    const detail = error.name === 'AbortError' ? 'no answer'
      : error instanceof TypeError ? 'server unreachable' : error.message;
    setConnection(false, detail);
    previous = null;  // the next answer may come from a restarted server
    drawChart(performance.now());
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
