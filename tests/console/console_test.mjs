// The ragd console in Debian's Chromium (playwright-core, no browser download) against the real
// daemon started by run.sh with auth on. Env: RAGD_URL, RAGD_ADMIN_KEY, CHROMIUM, SCREENSHOT_DIR,
// PROFILE_DIR (a fresh --user-data-dir).
//
// Checks: the page asks for a key; Ask streams tokens (two or more intermediate states of the
// answer) after its sources; a second identical question shows reused tokens; documents uploaded
// through the file picker and by drag and drop are listed (one is deleted, one retrieved by a
// question); too-large, unsupported and not-found errors are shown; a run is cancelled
// mid-stream; the Live view fills; the layout fits a phone width; tabs work from the keyboard; a
// bad API key is reported; no unexpected console errors.
import assert from 'node:assert/strict';
import path from 'node:path';
import { chromium } from 'playwright-core';

const base = process.env.RAGD_URL;
const adminKey = process.env.RAGD_ADMIN_KEY;
const shots = process.env.SCREENSHOT_DIR;
assert.ok(base && adminKey && process.env.CHROMIUM && shots && process.env.PROFILE_DIR, 'environment not set (run through run.sh)');

// Wait for /readyz (the daemon loads its model in the background).
for (let i = 0; ; i++) {
  try {
    if ((await fetch(`${base}/readyz`)).status === 200) break;
  } catch (e) { /* not listening yet */ }
  if (i > 600) throw new Error('daemon never became ready');
  await new Promise((r) => setTimeout(r, 100));
}

// Static files: headers the console relies on.
{
  const r = await fetch(`${base}/`);
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^text\/html/);
  assert.match(r.headers.get('content-security-policy'), /default-src 'self'; connect-src 'self' ws: wss:/);
  assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
  const etag = r.headers.get('etag');
  assert.ok(etag, 'no ETag');
  const again = await fetch(`${base}/`, { headers: { 'If-None-Match': etag } });
  assert.equal(again.status, 304);
  const js = await fetch(`${base}/console/console.js`);
  assert.equal(js.status, 200);
  assert.match(js.headers.get('content-type'), /^text\/javascript/);
  assert.equal((await fetch(`${base}/console/nope.js`)).status, 404);
}

const context = await chromium.launchPersistentContext(process.env.PROFILE_DIR, {
  executablePath: process.env.CHROMIUM,
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1280, height: 900 },
});
context.setDefaultTimeout(60000);
const page = context.pages()[0] ?? await context.newPage();

// Console errors: the browser logs every failed request ("Failed to load resource: ... 401");
// those are expected only where the test provokes them.
let allowed = [];
const unexpected = [];
page.on('console', (m) => {
  if (m.type() !== 'error') return;
  const t = m.text();
  if (!allowed.some((re) => re.test(t))) unexpected.push(t);
});
page.on('pageerror', (e) => unexpected.push('page error: ' + e.message));
const expectHttpErrors = (...codes) => {
  allowed = codes.map((c) => (c === 'reset' ? /Failed to load resource: net::ERR_CONNECTION_(RESET|ABORTED|CLOSED)/
    : new RegExp(`Failed to load resource: the server responded with a status of ${c}`)));
};

const step = (s) => console.log(`- ${s}`);

// 1. Auth is on: without a key the console says so; with the admin key it connects.
expectHttpErrors(401);
await page.goto(`${base}/`);
await page.locator('#banner').getByText(/requires an API key/).waitFor();
await page.fill('#api-key', adminKey);
await page.click('#key-form button[type=submit]');
await page.locator('#conn').getByText(/^connected/).waitFor();
assert.equal(await page.locator('#banner').isHidden(), true);
assert.ok((await page.locator('#pipeline option').count()) >= 1, 'no pipelines listed');
expectHttpErrors();
step('key entry and pipelines');

// Records the answer's text at every change and when sources arrived (page clock).
async function watchRun() {
  await page.evaluate(() => {
    const w = { states: [], sourcesAt: null, firstTokenAt: null };
    window.__run = w;
    const answer = document.getElementById('answer');
    new MutationObserver(() => {
      const t = answer.textContent;
      if (t && w.firstTokenAt === null) w.firstTokenAt = performance.now();
      if (answer.getAttribute('aria-busy') === 'true' && t && w.states[w.states.length - 1] !== t) w.states.push(t);
    }).observe(answer, { childList: true, characterData: true, subtree: true });
    new MutationObserver(() => {
      if (document.querySelectorAll('#sources li').length && w.sourcesAt === null) w.sourcesAt = performance.now();
    }).observe(document.getElementById('sources'), { childList: true });
  });
}
async function ask(question, { maxTokens = 24, topK = '', ignoreEos = false } = {}) {
  await page.fill('#question', question);
  await page.fill('#max-tokens', String(maxTokens));
  await page.fill('#top-k', String(topK));
  await page.setChecked('#ignore-eos', ignoreEos);
  await watchRun();
  await page.click('#ask-btn');
}
const waitDone = () => page.locator('#run-state').getByText(/^(done|cancelled)/).waitFor();

// 2. Ask: sources first, then tokens one by one, then usage and timings.
const question = 'Who studied the sea urchin at Wouthton?';
await ask(question);
await waitDone();
let run = await page.evaluate(() => window.__run);
const answer1 = await page.locator('#answer').textContent();
assert.ok(answer1.length > 0, 'empty answer');
assert.ok(run.states.length >= 2, `answer did not stream: states ${JSON.stringify(run.states)}`);
assert.ok(run.sourcesAt !== null && run.sourcesAt <= run.firstTokenAt, 'sources did not come before the first token');
const nSources = await page.locator('#sources li').count();
assert.ok(nSources >= 1, 'no sources');
const firstSource = page.locator('#sources li').first();
assert.match(await firstSource.locator('a.doc-link').getAttribute('href'), /^\/v1\/documents\//);
assert.match(await firstSource.locator('.score').first().textContent(), /^score \d/);
assert.match(await page.locator('#timings').textContent(), /TTFT.*ms/);
step(`ask: ${run.states.length} streamed states, ${nSources} sources, answer ${JSON.stringify(answer1.trim())}`);

// The source link opens the document (GET /v1/documents/{id} with the key).
await firstSource.locator('a.doc-link').click();
await page.locator('#doc-view').waitFor({ state: 'visible' });
assert.ok((await page.locator('#doc-view-text').textContent()).length > 0, 'document text empty');
await page.click('#doc-view-close');

// 3. The same question again: the document KV is reused.
await ask(question);
await waitDone();
const reused = Number(await page.locator('#token-bar').getAttribute('data-reused'));
assert.ok(reused > 0, `no reused tokens on the second run (bar ${await page.locator('#token-legend').textContent()})`);
assert.ok((await page.locator('#token-bar .seg').count()) >= 1, 'empty token bar');
step(`second run reused ${reused} tokens`);
await page.screenshot({ path: path.join(shots, 'console-ask.png'), fullPage: true });

// 4. Documents: upload through the file picker; errors for too large, unsupported, not found.
await page.click('#tab-docs');
const uploaded = 'quillmere-lens.txt';
await page.setInputFiles('#file-input', {
  name: uploaded, mimeType: 'text/plain',
  buffer: Buffer.from('Records from Quillmere show that Dara Vantosk examined the glass lens in 1842. ' +
    'The lens grinding workshop at Quillmere polished 57 lenses a year.'),
});
await page.locator(`#uploads li[data-file="${uploaded}"][data-state="done"]`).waitFor();
await page.locator(`#docs tbody tr[data-id="${uploaded}"]`).waitFor();
// Drag and drop: a file dropped on the drop zone; then deleted from the list (after a confirm).
await page.evaluate(() => {
  const dt = new DataTransfer();
  dt.items.add(new File(['Dropped notes about the tide gauge at Quillmere.'], 'dropped-notes.md', { type: 'text/markdown' }));
  document.getElementById('drop-zone').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
});
await page.locator('#uploads li[data-file="dropped-notes.md"][data-state="done"]').waitFor();
await page.locator('#docs tbody tr[data-id="dropped-notes.md"]').waitFor();
page.once('dialog', (d) => d.accept());
await page.click('#docs tbody tr[data-id="dropped-notes.md"] button.danger');
await page.locator('#docs tbody tr[data-id="dropped-notes.md"]').waitFor({ state: 'detached' });
assert.match(await page.locator('#docs-msg').textContent(), /Deleted "dropped-notes.md"/);
// A server that refuses a body mid-upload may reset the connection before the browser reads the 413.
expectHttpErrors(413, 404, 'reset');
await page.setInputFiles('#file-input', { name: 'huge.txt', mimeType: 'text/plain', buffer: Buffer.alloc(400 * 1024, 'a') });
await page.locator('#uploads li[data-file="huge.txt"][data-state="error"]').getByText(/too large/i).waitFor();
await page.setInputFiles('#file-input', { name: 'photo.png', mimeType: 'image/png', buffer: Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1]) });
await page.locator('#uploads li[data-file="photo.png"][data-state="error"]').getByText(/unsupported type/).waitFor();
await page.fill('#open-id', 'someone-elses-document');
await page.click('#open-form button[type=submit]');
await page.locator('#banner').getByText(/not found.*another tenant/).waitFor();
expectHttpErrors();
step('upload (picker and drop), list, delete, too large, unsupported type, not found');

// ... and a question finds the uploaded document.
await page.click('#tab-ask');
await ask('Who examined the glass lens at Quillmere?', { topK: 3 });
await waitDone();
const ids = await page.locator('#sources a.doc-link').allTextContents();
assert.ok(ids.includes(uploaded), `uploaded document not retrieved: ${ids}`);
step(`uploaded document retrieved (sources ${ids.join(', ')})`);

// 5. Cancel mid-stream.
await ask('Tell me everything about the reefs.', { maxTokens: 3000, ignoreEos: true });
await page.locator('#run-state').getByText(/generating… ([2-9]|\d\d+) token/).waitFor();
await page.click('#cancel-btn');
await page.locator('#run-state').getByText(/^cancelled after \d+ token/).waitFor();
const cancelledText = await page.locator('#run-state').textContent();
const nTokens = Number(/after (\d+)/.exec(cancelledText)[1]);
assert.ok(nTokens < 3000, `run was not cut short (${nTokens} tokens)`);
assert.match(await page.locator('#timings').textContent(), /cancelled/);
assert.equal(await page.locator('#ask-btn').isEnabled(), true);
step(`cancelled after ${nTokens} tokens`);

// 6. Live view: tiers, TTFT histogram, run rate; refreshed every 2 s. A little load (runs from
// node, beside the browser) makes the rate move.
await page.click('#tab-live');
await page.locator('#tiers tbody tr[data-tier="hbm"]').waitFor();
await page.locator('#ttft-summary').getByText(/\d+ runs/).waitFor();
const waitRefresh = async () => {
  const before = await page.locator('#live-updated').textContent();
  await page.waitForFunction((u) => document.getElementById('live-updated').textContent !== u, before, { timeout: 10000 });
};
await waitRefresh();
const questions = ['Who studied the levain at Wydale?', 'How much power did the array at Vul Point deliver at peak flow?',
  'Who studied the volva at Drybekton?', 'When did Chian Fevatous examine the apoapsis?'];
for (let round = 0; round < 3; round++) {
  const runs = questions.map((q) => fetch(`${base}/v1/pipelines/default/runs`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${adminKey}` },
    body: JSON.stringify({ query: q, max_tokens: 8 }),
  }).then((r) => assert.equal(r.status, 200)));
  await Promise.all(runs);
  await waitRefresh();
}
// The run rate saw that load (the spark line keeps the last two minutes of it).
await page.waitForFunction(() => [...document.querySelectorAll('#rate-spark .bar')].some((b) => parseFloat(b.style.height) > 0),
  null, { timeout: 10000 });
assert.ok((await page.locator('#ttft-hist .bar').count()) >= 6, 'no TTFT histogram');
const hbmBytes = await page.locator('#tiers tbody tr[data-tier="hbm"] td').first().textContent();
step(`live view: HBM ${hbmBytes}, ${await page.locator('#ttft-summary').textContent()}`);
await page.screenshot({ path: path.join(shots, 'console-live.png'), fullPage: true });

// 7. Keyboard: arrows move between tabs.
await page.focus('#tab-live');
await page.keyboard.press('ArrowRight');
assert.equal(await page.getAttribute('#tab-docs', 'aria-selected'), 'true');
assert.equal(await page.evaluate(() => document.activeElement.id), 'tab-docs');
await page.keyboard.press('Home');
assert.equal(await page.getAttribute('#tab-ask', 'aria-selected'), 'true');
step('keyboard tabs');

// 8. Phone width: nothing wider than the screen.
await page.setViewportSize({ width: 390, height: 844 });
for (const tab of ['ask', 'live', 'docs']) {
  await page.click(`#tab-${tab}`);
  const [sw, iw, wide] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth,
    [...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1)
      .map((e) => `${e.tagName.toLowerCase()}#${e.id}.${e.className}`).slice(0, 8)]);
  assert.ok(sw <= iw + 1, `${tab} view overflows a phone width: ${sw} > ${iw} (${wide.join(', ')})`);
}
await page.setViewportSize({ width: 1280, height: 900 });
await page.click('#tab-ask');
step('phone width');

// 9. A bad API key is reported.
expectHttpErrors(401);
await page.fill('#api-key', 'sk-wrong');
await page.click('#key-form button[type=submit]');
await page.locator('#banner').getByText(/API key rejected \(401\)/).waitFor();
step('bad API key');

await context.close();
assert.deepEqual(unexpected, [], 'unexpected console errors');
console.log('console browser test: all checks passed');
