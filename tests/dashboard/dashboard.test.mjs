// The dashboard in a real browser (Debian's chromium, headless, driven by
// playwright-core): the page served by `sluice serve` on its admin port shows
// the exact counts of the decisions this test makes, follows new decisions
// without a reload, survives a server restart, logs no console error and
// requests nothing outside the admin origin; a page opened after the
// decisions draws them from the server's history, one chart per route.
//
// Run by ctest (label `dashboard`), which installs playwright-core first and
// sets SLUICE_BINARY, DASHBOARD_NODE_DIR and CHROMIUM.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const sluiceBinary = process.env.SLUICE_BINARY;
const nodeDir = process.env.DASHBOARD_NODE_DIR;
const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';
assert.ok(sluiceBinary, 'SLUICE_BINARY must name the sluice executable');
assert.ok(nodeDir, 'DASHBOARD_NODE_DIR must name the folder where npm ci installed playwright-core');
const { chromium } = createRequire(join(nodeDir, 'package.json'))('playwright-core');

// Refills of one token per hour: the counts are exact however slow the run.
const policyYaml = `
headers: [legacy]
policies:
  login: {capacity: 5, refill_rate: 1/h}
routes:
  - match: GET /api/search
    limits: [{capacity: 3, refill_rate: 1/h}]
`;

const dir = mkdtempSync(join(tmpdir(), 'sluice-dashboard-'));
const running = new Set();

// Polls `probe` until it returns a truthy value; fails after `timeoutMs`.
async function until(what, probe, timeoutMs = 10000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

// Starts `sluice serve` on `listen`/`admin` (port 0 = any free port; the
// startup log names the ports bound) with `extraYaml` added to the config,
// and waits for /healthz (asked with `token` when given).
async function startServer(listen = '127.0.0.1:0', admin = '127.0.0.1:0',
  { extraYaml = '', token = null } = {}) {
  const config = join(dir, 'sluice.yaml');
  writeFileSync(config, `listen: ${listen}\nadmin: ${admin}\n${policyYaml}${extraYaml}`);
  const child = spawn(sluiceBinary, ['serve', '--config', config], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const server = { child, log: '', exited: false };
  running.add(server);
  // 'close' comes once stderr is read to its end, after 'exit'.
  const closed = once(child, 'close');
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (text) => { server.log += text; });
  child.on('exit', () => { server.exited = true; });
  const portAfter = (prefix) => {
    const m = server.log.match(new RegExp(`${prefix}https?://127\\.0\\.0\\.1:(\\d+)`));
    return m ? Number(m[1]) : 0;
  };
  await until('the server to name its ports', async () => {
    if (server.exited) {
      await closed;  // the whole log, the reason included
      running.delete(server);
      throw new Error(`sluice exited at startup:\n${server.log}`);
    }
    return portAfter('listening on ') && portAfter('admin on ');
  }, 20000);
  server.base = `http://127.0.0.1:${portAfter('listening on ')}`;
  server.admin = `http://127.0.0.1:${portAfter('admin on ')}`;
  const auth = token === null ? {} : { authorization: `Bearer ${token}` };
  await until('/healthz', async () => {
    try {
      return (await fetch(`${server.admin}/healthz`, { headers: auth })).status === 200;
    } catch {
      return false;
    }
  });
  return server;
}

// Stops the server by its PID and checks it exited cleanly.
async function stopServer(server) {
  if (!server.exited) {
    const exit = once(server.child, 'exit');
    process.kill(server.child.pid, 'SIGTERM');
    const timer = setTimeout(() => server.child.kill('SIGKILL'), 10000);
    const [code, signal] = await exit;
    clearTimeout(timer);
    assert.equal(signal, null, `sluice was killed by ${signal}`);
    assert.equal(code, 0, `sluice exited with ${code}:\n${server.log}`);
  }
  running.delete(server);
  assert.doesNotMatch(server.log, /ERROR: AddressSanitizer|runtime error:|LeakSanitizer/);
}

// POST /v1/check for `key` of the login policy, `count` times: statuses in order.
async function check(server, key, count) {
  const statuses = [];
  for (let i = 0; i < count; ++i) {
    const r = await fetch(`${server.base}/v1/check`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ policy: 'login', key }),
    });
    await r.arrayBuffer();
    statuses.push(r.status);
  }
  return statuses;
}

async function search(server, count) {
  const statuses = [];
  for (let i = 0; i < count; ++i) {
    const r = await fetch(`${server.base}/api/search`);
    await r.arrayBuffer();
    statuses.push(r.status);
  }
  return statuses;
}

const repeat = (value, n) => Array(n).fill(value);

// The text of the cells of one row of the routes table, by column class.
async function routeRow(page, name) {
  return page.evaluate((routeName) => {
    const row = [...document.querySelectorAll('#routes tbody tr')]
      .find((tr) => tr.dataset.name === routeName);
    if (!row) return null;
    const text = (cls) => row.querySelector(`.${cls}`).textContent;
    return { allowed: text('allowed'), denied: text('denied'), errors: text('errors'), rate: text('rate') };
  }, name);
}

async function topKeys(page) {
  return page.$$eval('#top-keys tbody tr', (rows) => rows.map((tr) => ({
    key: tr.querySelector('.key').textContent,
    count: tr.querySelector('.count').textContent,
  })));
}

const text = (page, selector) => page.textContent(selector);

// The totals of what the chart of `route` draws (window.sluiceHistory), or
// null when it has none.
async function historyTotals(page, route) {
  return page.evaluate((name) => {
    const series = window.sluiceHistory?.routes.get(name);
    if (!series) return null;
    const sum = (values) => values.reduce((a, b) => a + b, 0);
    return { allowed: sum(series.allowed), denied: sum(series.denied), error: sum(series.error) };
  }, route);
}

// The totals per route of GET /admin/history?seconds=900 (whole seconds only).
async function serverHistoryTotals(server) {
  const answer = await (await fetch(`${server.admin}/admin/history?seconds=900`)).json();
  const sum = (values) => values.reduce((a, b) => a + b, 0);
  return Object.fromEntries(Object.entries(answer.routes).map(([name, c]) =>
    [name, { allowed: sum(c.allowed), denied: sum(c.denied), error: sum(c.error) }]));
}

// Waits until the page shows `expected` (deepEqual) for `read(page)`. The page
// polls once a second; the bound leaves a loaded machine (the sanitizers,
// ctest -j) its margin.
async function showsEventually(what, read, expected, timeoutMs = 15000) {
  let last;
  try {
    await until(what, async () => {
      last = await read();
      try {
        assert.deepEqual(last, expected);
        return true;
      } catch {
        return false;
      }
    }, timeoutMs);
  } catch {
    assert.deepEqual(last, expected, `the page does not show ${what}`);
  }
}

// Debian's chromium, headless.
const launchBrowser = () => chromium.launch({
  executablePath: chromiumPath,
  args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
});

let browser;

after(async () => {
  await browser?.close();
  for (const server of running) {
    if (!server.exited) server.child.kill('SIGKILL');
  }
  rmSync(dir, { recursive: true, force: true });
});

test('the dashboard shows exact live counts, follows new decisions and survives a restart',
  { timeout: 90000 }, async () => {
    let server = await startServer();
    const origin = server.admin;

    // 8 checks of one key against capacity 5: exactly 5 allowed, then 3 denied.
    assert.deepEqual(await check(server, 'user:42', 8), [...repeat(200, 5), ...repeat(429, 3)]);
    // 5 searches against capacity 3.
    assert.deepEqual(await search(server, 5), [...repeat(200, 3), ...repeat(429, 2)]);

    browser = await launchBrowser();
    const page = await browser.newPage();
    const requests = [];
    const consoleErrors = [];
    const pageErrors = [];
    let outage = false;  // while the server is down on purpose
    page.on('request', (r) => requests.push(r.url()));
    page.on('console', (m) => {
      if (m.type() === 'error') consoleErrors.push({ text: m.text(), outage });
    });
    page.on('pageerror', (e) => pageErrors.push(String(e)));

    const response = await page.goto(`${origin}/dashboard`);
    assert.equal(response.status(), 200);
    assert.equal(response.headers()['content-security-policy'],
      "default-src 'self'; base-uri 'self'; form-action 'self'; frame-ancestors 'self'");
    assert.equal(await page.title(), 'Sluice dashboard');

    await showsEventually('the login policy counts', () => routeRow(page, 'policy:login'),
      { allowed: '5', denied: '3', errors: '0', rate: '0.0' });
    assert.deepEqual(await routeRow(page, 'GET /api/search'),
      { allowed: '3', denied: '2', errors: '0', rate: '0.0' });
    assert.deepEqual(await topKeys(page), [
      { key: 'policy:login|user:42', count: '3' },
      { key: 'route:GET /api/search|ip:127.0.0.1', count: '2' },
    ]);
    assert.equal(await text(page, '#connection'), 'Connected');
    assert.equal(await text(page, '#store-backend'), 'memory');
    assert.equal(await text(page, '#store-ready'), 'ready');
    assert.equal(await text(page, '#version'), '0.1.0');
    assert.equal(await text(page, '#generation'), '1');
    assert.equal(await text(page, '#reloads'), '0 succeeded, 0 failed');
    // Keys held: user:42 of login, and the search key.
    assert.equal(await text(page, '#keys-held'), '2');
    assert.equal(await page.isHidden('#no-keys'), true);

    // More decisions: the same document follows them (no reload).
    await page.evaluate(() => {
      window.sameDocument = true;
      // The poll that spans the new decisions shows a login rate above zero
      // until the next poll: noted here when the page writes it, so that a
      // slow test cannot miss it.
      window.sawLoginRate = false;
      new MutationObserver(() => {
        const row = [...document.querySelectorAll('#routes tbody tr')]
          .find((tr) => tr.dataset.name === 'policy:login');
        if (row && Number(row.querySelector('.rate').textContent) > 0) window.sawLoginRate = true;
      }).observe(document.querySelector('#routes tbody'),
        { childList: true, subtree: true, characterData: true });
    });
    assert.deepEqual(await check(server, 'user:42', 4), repeat(429, 4));
    assert.deepEqual(await check(server, 'user:7', 3), repeat(200, 3));
    await until('a decision rate above zero', () => page.evaluate(() => window.sawLoginRate),
      15000);
    await showsEventually('the new login counts', () => routeRow(page, 'policy:login'),
      { allowed: '8', denied: '7', errors: '0', rate: '0.0' });
    assert.deepEqual((await topKeys(page))[0], { key: 'policy:login|user:42', count: '7' });
    assert.equal(await text(page, '#keys-held'), '3');
    assert.equal(await page.evaluate(() => window.sameDocument), true, 'the page was reloaded');

    // A reload through the admin API shows on the page.
    assert.equal((await fetch(`${origin}/admin/reload`, { method: 'POST' })).status, 200);
    await showsEventually('the reload', () => text(page, '#generation'), '2');
    assert.match(await text(page, '#reloads'),
      /^1 succeeded, 0 failed; last at .+: generation 2 in force$/);

    // The server goes away: the page says so and keeps polling.
    outage = true;
    const adminPort = new URL(origin).port;
    await stopServer(server);
    await showsEventually('the disconnection',
      async () => (await text(page, '#connection')).startsWith('Disconnected'), true);
    // ... and comes back as a new process on the admin port the page polls
    // (the listen port may change: the page never uses it). That port was
    // free meanwhile, and another program (ctest -j runs tests side by side)
    // may have taken it: then the server cannot bind it and exits, and it is
    // started on a new port, where the page is sent (a new document there).
    const origins = [origin];
    let samePort = true;
    try {
      server = await startServer('127.0.0.1:0', `127.0.0.1:${adminPort}`);
    } catch (error) {
      assert.match(error.message,
        new RegExp(`cannot bind admin address 127\\.0\\.0\\.1:${adminPort}: Address already in use`));
      samePort = false;
      server = await startServer();
      origins.push(server.admin);
      await page.goto(`${server.admin}/dashboard`);
    }
    await showsEventually('the reconnection', () => text(page, '#connection'), 'Connected');
    outage = false;
    assert.deepEqual(await check(server, 'user:42', 2), repeat(200, 2));
    await showsEventually('the counts of the new process', () => routeRow(page, 'policy:login'),
      { allowed: '2', denied: '0', errors: '0', rate: '0.0' });
    assert.equal(await page.isVisible('#no-keys'), true);
    assert.equal(await text(page, '#generation'), '1');
    if (samePort) {
      assert.equal(await page.evaluate(() => window.sameDocument), true, 'the page was reloaded');
    }

    // Nothing outside the admin origin(s), no script error, and no console
    // error but the failed polls of the outage (refused connections; on a
    // port another program took, whatever that program answers).
    const foreign = requests.filter((url) => !origins.includes(new URL(url).origin));
    assert.deepEqual(foreign, []);
    assert.ok(requests.includes(`${origin}/admin/stats`));
    assert.deepEqual(pageErrors, []);
    const unexpected = consoleErrors.filter((e) => !(e.outage && (!samePort
      || /^Failed to load resource: net::ERR_CONNECTION_REFUSED$/.test(e.text))));
    assert.deepEqual(unexpected, []);

    await browser.close();
    browser = undefined;
    await stopServer(server);
  });

// With admin_token_all the stats need the token: the page asks for it (and
// takes it from its URL fragment, which never reaches the server), keeps it
// for the tab, and then shows the same exact counts.
test('with admin_token_all the dashboard asks for the token and then shows the counts',
  { timeout: 60000 }, async () => {
    const token = 't0ken-for-the-dashboard';
    writeFileSync(join(dir, 'admin.token'), `${token}\n`);
    const server = await startServer('127.0.0.1:0', '127.0.0.1:0', {
      extraYaml: 'admin_token_file: admin.token\nadmin_token_all: true\n', token });
    assert.deepEqual(await check(server, 'user:1', 6), [...repeat(200, 5), 429]);
    assert.equal((await fetch(`${server.admin}/admin/stats`)).status, 401);
    assert.equal((await fetch(`${server.admin}/admin/history`)).status, 401);

    const tokenBrowser = await launchBrowser();
    try {
      const page = await tokenBrowser.newPage();
      const pageErrors = [];
      page.on('pageerror', (e) => pageErrors.push(String(e)));
      assert.equal((await page.goto(`${server.admin}/dashboard`)).status(), 200);
      await page.waitForSelector('#token-form', { state: 'visible' });
      assert.match(await text(page, '#connection'), /the admin token is needed/);
      await page.fill('#token-input', token);
      await page.click('#token-form button');
      await showsEventually('the login policy counts', () => routeRow(page, 'policy:login'),
        { allowed: '5', denied: '1', errors: '0', rate: '0.0' });
      assert.deepEqual(await historyTotals(page, 'policy:login'),
        { allowed: 5, denied: 1, error: 0 });
      assert.equal(await page.isHidden('#token-form'), true);
      assert.equal(await text(page, '#connection'), 'Connected');

      // A new tab of its own, given the token in the fragment.
      const second = await tokenBrowser.newPage();
      await second.goto(`${server.admin}/dashboard#token=${encodeURIComponent(token)}`);
      await showsEventually('the counts with the fragment\'s token',
        () => routeRow(second, 'policy:login'), { allowed: '5', denied: '1', errors: '0', rate: '0.0' });
      assert.equal(new URL(second.url()).hash, '', 'the token stays in the address bar');
      assert.equal(await second.isHidden('#token-form'), true);
      assert.deepEqual(pageErrors, []);
    } finally {
      await tokenBrowser.close();
    }
    await stopServer(server);
  });

// Decisions made before anyone looks: a page opened afterwards draws them
// from /admin/history when it opens (before any live poll could have seen
// them), one chart per route, and then follows new decisions.
test('a dashboard opened after the decisions draws them from the history, one chart per route',
  { timeout: 60000 }, async () => {
    const server = await startServer();
    assert.deepEqual(await check(server, 'user:42', 8), [...repeat(200, 5), ...repeat(429, 3)]);
    assert.deepEqual(await search(server, 5), [...repeat(200, 3), ...repeat(429, 2)]);
    const expected = {
      'GET /api/search': { allowed: 3, denied: 2, error: 0 },
      none: { allowed: 0, denied: 0, error: 0 },
      'policy:login': { allowed: 5, denied: 3, error: 0 },
    };
    // The history holds whole seconds: wait until the second of the last
    // decision is over on the server.
    await showsEventually('the server\'s history', () => serverHistoryTotals(server), expected);

    const historyBrowser = await launchBrowser();
    try {
      const page = await historyBrowser.newPage();
      const pageErrors = [];
      const historyRequests = [];
      page.on('pageerror', (e) => pageErrors.push(String(e)));
      page.on('request', (r) => {
        if (new URL(r.url()).pathname === '/admin/history') historyRequests.push(r.url());
      });
      assert.equal((await page.goto(`${server.admin}/dashboard`)).status(), 200);
      await until('the history drawn', () => page.evaluate(() => window.sluiceHistory.loaded));
      assert.equal(historyRequests[0], `${server.admin}/admin/history?seconds=900`);
      // What the first answer drew: the decisions made before the page opened.
      for (const [route, totals] of Object.entries(expected)) {
        assert.deepEqual(await historyTotals(page, route), totals, route);
      }
      assert.deepEqual(await page.evaluate(() =>
        [...window.sluiceHistory.routes.values()].map((s) => s.allowed.length)), [900, 900, 900]);
      // One chart per route, in the answer's order.
      assert.deepEqual(await page.$$eval('#history figure.panel', (panels) =>
        panels.map((p) => [p.dataset.route, p.querySelector('figcaption').textContent,
          p.querySelectorAll('canvas').length])), [
        ['GET /api/search', 'GET /api/search', 1],
        ['none', 'none', 1],
        ['policy:login', 'policy:login', 1],
      ]);
      assert.equal(await page.isHidden('#no-history'), true);
      assert.equal(await page.getAttribute('#history figure[data-route="policy:login"] canvas',
        'aria-label'), 'Decisions per second of policy:login over the last 15 minutes: '
        + '5 allowed, 3 denied, 0 store errors');

      // New decisions join the charts live, in the same document.
      await page.evaluate(() => { window.sameDocument = true; });
      assert.deepEqual(await check(server, 'user:9', 2), repeat(200, 2));
      assert.deepEqual(await search(server, 1), [429]);
      await showsEventually('the new login decisions in the chart',
        () => historyTotals(page, 'policy:login'), { allowed: 7, denied: 3, error: 0 });
      await showsEventually('the new search decision in the chart',
        () => historyTotals(page, 'GET /api/search'), { allowed: 3, denied: 3, error: 0 });
      assert.equal(await page.evaluate(() => window.sameDocument), true, 'the page was reloaded');
      assert.ok(historyRequests.length >= 2);
      assert.ok(historyRequests.slice(1).every((url) =>
        /\/admin\/history\?seconds=([1-9]|[1-9][0-9]|[1-8][0-9][0-9]|900)$/.test(url)), historyRequests);
      assert.deepEqual(pageErrors, []);
    } finally {
      await historyBrowser.close();
    }
    await stopServer(server);
  });
