// ragd console: Ask (WebSocket /v1/stream), Live (/v1/cache/stats + /metrics), Documents
// (/v1/documents). Plain JavaScript, same origin only; the API key lives in sessionStorage and
// goes out as a bearer token (and as ?api_key= on the WebSocket, the one place the server takes it).
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const KEY_STORE = 'ragd.apiKey';
  const TIERS = ['hbm', 'dram', 'ssd'];

  // ---- small helpers ---------------------------------------------------------------------------
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }
  function fmtBytes(n) {
    if (!Number.isFinite(n)) return '–';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i === 0 ? String(Math.round(n)) : n.toFixed(n < 10 ? 2 : 1)) + ' ' + u[i];
  }
  const fmtMs = (v) => (Number.isFinite(v) ? (v < 10 ? v.toFixed(2) : v.toFixed(1)) + ' ms' : '–');
  const fmtInt = (v) => (Number.isFinite(v) ? Math.round(v).toLocaleString('en-US') : '–');

  function apiKey() { return sessionStorage.getItem(KEY_STORE) || ''; }
  function authHeaders(extra) {
    const h = Object.assign({}, extra || {});
    const k = apiKey();
    if (k) h.Authorization = 'Bearer ' + k;
    return h;
  }

  // An HTTP failure with the server's {"error":{code,message}} when there is one.
  class ApiFailure extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }
  async function failureOf(res) {
    let code = 'http_' + res.status;
    let message = res.statusText || 'request failed';
    try {
      const j = await res.json();
      if (j && j.error) { code = j.error.code || code; message = j.error.message || message; }
    } catch (e) { /* not JSON */ }
    return new ApiFailure(res.status, code, message);
  }
  async function api(path, opts) {
    const o = Object.assign({}, opts || {});
    o.headers = authHeaders(o.headers);
    let res;
    try {
      res = await fetch(path, o);
    } catch (e) {
      throw new ApiFailure(0, 'network', 'cannot reach the server (' + e.message + ')');
    }
    if (!res.ok) {
      const f = await failureOf(res);
      if (f.status === 401) onUnauthorized(f);
      throw f;
    }
    return res;
  }

  // ---- banner, key ------------------------------------------------------------------------------
  const banner = $('banner');
  function showError(msg) { banner.textContent = msg; banner.hidden = false; }
  function clearError() { banner.hidden = true; banner.textContent = ''; }
  function setConn(msg) { $('conn').textContent = msg; }

  function onUnauthorized(f) {
    const k = apiKey();
    showError(k ? 'API key rejected (401): ' + f.message + '. Enter a valid key above.'
                : 'This server requires an API key (401). Enter it above.');
    setConn('not authorised');
  }

  $('api-key').value = apiKey();
  $('key-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const k = $('api-key').value.trim();
    if (k) sessionStorage.setItem(KEY_STORE, k); else sessionStorage.removeItem(KEY_STORE);
    clearError();
    connect();
  });
  $('key-clear').addEventListener('click', () => {
    sessionStorage.removeItem(KEY_STORE);
    $('api-key').value = '';
    clearError();
    connect();
  });

  // ---- tabs -------------------------------------------------------------------------------------
  const tabs = ['ask', 'live', 'docs'];
  function selectTab(name, focus) {
    for (const t of tabs) {
      const on = t === name;
      const b = $('tab-' + t);
      b.setAttribute('aria-selected', on ? 'true' : 'false');
      b.tabIndex = on ? 0 : -1;
      $('view-' + t).hidden = !on;
      if (on && focus) b.focus();
    }
    if (name === 'live') startLive(); else stopLive();
    if (name === 'docs') loadDocuments(true);
  }
  tabs.forEach((t, i) => {
    const b = $('tab-' + t);
    b.addEventListener('click', () => selectTab(t, false));
    b.addEventListener('keydown', (ev) => {
      let j = -1;
      if (ev.key === 'ArrowRight') j = (i + 1) % tabs.length;
      else if (ev.key === 'ArrowLeft') j = (i + tabs.length - 1) % tabs.length;
      else if (ev.key === 'Home') j = 0;
      else if (ev.key === 'End') j = tabs.length - 1;
      if (j >= 0) { ev.preventDefault(); selectTab(tabs[j], true); }
    });
  });

  // ---- pipelines ---------------------------------------------------------------------------------
  let pipelines = [];
  async function connect() {
    setConn('connecting…');
    try {
      const res = await api('/v1/pipelines');
      const j = await res.json();
      pipelines = j.data || [];
      const sel = $('pipeline');
      const prev = sel.value;
      sel.replaceChildren(...pipelines.map((p) => el('option', { value: p.name, text: p.name })));
      if (pipelines.some((p) => p.name === prev)) sel.value = prev;
      describePipeline();
      setConn('connected' + (apiKey() ? ' with an API key' : '') + ' · ' + pipelines.length + ' pipeline(s)');
      clearError();
    } catch (f) {
      if (f.status === 503) {
        setConn('server is loading its model…');
        setTimeout(connect, 1000);
      } else if (f.status !== 401) {
        showError('Cannot list pipelines: ' + f.message);
        setConn('error');
      }
    }
  }
  function describePipeline() {
    const p = pipelines.find((x) => x.name === $('pipeline').value);
    $('pipeline-desc').textContent = p
      ? (p.description ? p.description + ' · ' : '') + 'reuse ' + p.reuse + ', top_k ' + p.top_k + ', max_tokens ' + p.max_tokens
      : '';
  }
  $('pipeline').addEventListener('change', describePipeline);

  // ---- Ask --------------------------------------------------------------------------------------
  let ws = null;        // the WebSocket of the run in flight
  let running = false;

  function setRunning(on, state) {
    running = on;
    $('ask-btn').disabled = on;
    $('cancel-btn').disabled = !on;
    $('answer').setAttribute('aria-busy', on ? 'true' : 'false');
    if (state !== undefined) $('run-state').textContent = state;
  }

  function numberField(id, name, out, integer) {
    const v = $(id).value.trim();
    if (v === '') return;
    const n = Number(v);
    if (!Number.isFinite(n) || (integer && !Number.isInteger(n))) throw new Error(name + ' must be ' + (integer ? 'an integer' : 'a number'));
    out[name] = n;
  }

  function wsUrl() {
    const k = apiKey();
    return (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/v1/stream' +
      (k ? '?api_key=' + encodeURIComponent(k) : '');
  }

  $('ask-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    if (running) return;
    const run = { type: 'run', pipeline: $('pipeline').value || 'default', query: $('question').value.trim() };
    try {
      if (!run.query) throw new Error('enter a question');
      numberField('top-k', 'top_k', run, true);
      numberField('max-tokens', 'max_tokens', run, true);
      numberField('temperature', 'temperature', run, false);
    } catch (e) {
      showError('Cannot ask: ' + e.message);
      return;
    }
    if ($('reuse').value) run.reuse = $('reuse').value;
    if ($('ignore-eos').checked) run.ignore_eos = true;
    clearError();
    startRun(run);
  });

  $('cancel-btn').addEventListener('click', () => {
    if (ws && ws.readyState === WebSocket.OPEN) {
      ws.send(JSON.stringify({ type: 'cancel' }));
      $('run-state').textContent = 'cancelling…';
    }
  });

  function resetOutput() {
    $('sources').replaceChildren();
    $('sources-empty').hidden = false;
    $('answer').textContent = '';
    $('token-bar').replaceChildren();
    $('token-bar').setAttribute('aria-label', 'run in progress');
    $('token-legend').replaceChildren();
    $('timings').replaceChildren();
  }

  function startRun(run) {
    resetOutput();
    setRunning(true, 'connecting…');
    let done = false;
    let tokens = 0;
    const sock = new WebSocket(wsUrl());
    ws = sock;
    sock.addEventListener('open', () => {
      $('run-state').textContent = 'retrieving…';
      sock.send(JSON.stringify(run));
    });
    sock.addEventListener('message', (m) => {
      let ev;
      try { ev = JSON.parse(m.data); } catch (e) { return; }
      if (ev.event === 'sources') {
        renderSources(ev.sources || []);
        $('run-state').textContent = 'generating…';
      } else if (ev.event === 'token') {
        $('answer').append(ev.text);
        tokens++;
        $('run-state').textContent = 'generating… ' + tokens + ' token(s)';
      } else if (ev.event === 'done') {
        done = true;
        renderUsage(ev);
        setRunning(false, ev.finish_reason === 'cancelled' ? 'cancelled after ' + tokens + ' token(s)'
                                                            : 'done (' + ev.finish_reason + ')');
        sock.close(1000);
      } else if (ev.event === 'error') {
        done = true;
        const e = ev.error || {};
        showError('Run failed (' + (e.status || '') + ' ' + (e.code || 'error') + '): ' + (e.message || ''));
        setRunning(false, 'failed');
        sock.close(1000);
      }
    });
    sock.addEventListener('close', (c) => {
      if (ws === sock) ws = null;
      if (done) return;
      setRunning(false, 'disconnected');
      if (c.code === 1008) showError('The server closed the stream: ' + (c.reason || 'policy violation'));
      else if (!tokens) checkWhyRefused();
      else showError('The connection closed before the run finished (code ' + c.code + ').');
    });
  }

  // Browsers do not expose why an upgrade was refused: ask an ordinary route with the same key.
  async function checkWhyRefused() {
    try {
      await api('/v1/pipelines');
      showError('The WebSocket /v1/stream was refused or closed; the server may be shutting down.');
    } catch (f) {
      if (f.status !== 401) showError('The WebSocket /v1/stream was refused: ' + f.message);
    }
  }

  function renderSources(sources) {
    const ol = $('sources');
    ol.replaceChildren();
    $('sources-empty').hidden = sources.length > 0;
    if (!sources.length) $('sources-empty').textContent = 'No sources were retrieved for this run.';
    for (const s of sources) {
      // The citation: the title links to the document's URL when it has one (else to the stored
      // document), then the section path and the page.
      const label = s.title || s.doc_id;
      const cite = s.url && /^https?:\/\//i.test(s.url)
        ? el('a', { href: s.url, class: 'doc-link cite', text: label, target: '_blank', rel: 'noopener noreferrer' })
        : el('a', { href: '/v1/documents/' + encodeURIComponent(s.doc_id), class: 'doc-link cite', text: label });
      if (!(s.url && /^https?:\/\//i.test(s.url))) {
        cite.addEventListener('click', (ev) => { ev.preventDefault(); openDocument(s.doc_id); });
      }
      const where = [];
      if (Array.isArray(s.section) && s.section.length) where.push(s.section.join(' \u203a '));
      if (s.page) where.push('page ' + s.page);
      const docLink = el('a', { href: '/v1/documents/' + encodeURIComponent(s.doc_id), class: 'doc-link', text: s.doc_id });
      docLink.addEventListener('click', (ev) => { ev.preventDefault(); openDocument(s.doc_id); });
      ol.append(el('li', {},
        el('div', { class: 'meta' }, cite,
          el('span', { class: 'section', text: where.join(' \u00b7 ') })),
        el('div', { class: 'meta' }, docLink,
          el('span', { class: 'score', text: 'score ' + Number(s.score).toFixed(3) }),
          el('span', { class: 'score', text: 'chunk ' + s.chunk_id }),
          el('span', { class: 'score', text: 'bytes ' + s.byte_begin + '\u2013' + s.byte_end })),
        el('p', { class: 'snippet', text: s.snippet || '' })));
    }
  }

  function renderUsage(ev) {
    const u = ev.usage || {};
    const t = ev.timings || {};
    const reused = u.reused_tokens || {};
    const prompt = u.prompt_tokens || 0;
    const parts = TIERS.map((tier) => ({ name: tier, label: 'reused ' + tier.toUpperCase(), n: reused[tier] || 0 }));
    parts.push({ name: 'recomputed', label: 'recomputed', n: u.recomputed_tokens || 0 });
    const counted = parts.reduce((a, p) => a + p.n, 0);
    if (prompt > counted) parts.push({ name: 'other', label: 'other prompt tokens', n: prompt - counted });
    const total = Math.max(prompt, counted, 1);
    const bar = $('token-bar');
    bar.replaceChildren();
    const reusedTotal = TIERS.reduce((a, tier) => a + (reused[tier] || 0), 0);
    bar.dataset.reused = String(reusedTotal);
    bar.dataset.prompt = String(prompt);
    for (const p of parts) {
      if (!p.n) continue;
      const seg = el('div', { class: 'seg seg-' + p.name, title: p.label + ': ' + p.n });
      seg.style.width = (100 * p.n / total) + '%';
      bar.append(seg);
    }
    bar.setAttribute('aria-label', 'prompt ' + prompt + ' tokens: ' + parts.map((p) => p.label + ' ' + p.n).join(', '));
    const legend = $('token-legend');
    legend.replaceChildren(
      el('li', { id: 'usage-prompt' }, 'prompt ', el('strong', { text: fmtInt(prompt) })),
      el('li', { id: 'usage-reused' }, 'reused ', el('strong', { text: fmtInt(reusedTotal) })),
      ...parts.map((p) => {
        const sw = el('span', { class: 'sw seg-' + p.name, 'aria-hidden': 'true' });
        return el('li', {}, sw, p.label + ' ', el('strong', { text: fmtInt(p.n) }));
      }),
      el('li', {}, 'completion ', el('strong', { text: fmtInt(u.completion_tokens) })));
    if (u.approximate) {
      legend.append(el('li', { id: 'usage-blend' }, (u.reuse || 'blend') + ': placed ',
        el('strong', { text: fmtInt(u.blended_tokens) }), ', repaired ', el('strong', { text: fmtInt(u.repaired_tokens) }),
        ' (approximate)'));
    }
    if (u.reuse_note) legend.append(el('li', { id: 'usage-reuse-note' }, 'exact reuse: ' + u.reuse_note));
    const rows = [
      ['TTFT', fmtMs(t.ttft_ms)], ['TPOT', fmtMs(t.tpot_ms)], ['total', fmtMs(t.total_ms)],
      ['queue', fmtMs(t.queue_ms)], ['retrieval', fmtMs(t.retrieval_ms)], ['KV load', fmtMs(t.kv_load_ms)],
      ['prefill', fmtMs(t.prefill_ms)], ['finish', ev.finish_reason || '–'],
    ];
    $('timings').replaceChildren(...rows.map(([k, v]) => el('div', {}, el('dt', { text: k }), el('dd', { text: v }))));
  }

  async function openDocument(id) {
    const view = $('doc-view');
    try {
      const res = await api('/v1/documents/' + encodeURIComponent(id));
      const d = await res.json();
      $('doc-view-h').textContent = d.title || d.id;
      $('doc-view-meta').textContent = 'id ' + d.id + ' · ' + (d.shared ? 'shared' : 'own') + ' · ' +
        (d.chunk_ids || []).length + ' chunk(s)' + (d.source ? ' · source ' + d.source : '');
      $('doc-view-text').textContent = d.text || '';
      view.hidden = false;
      $('doc-view-text').focus();
      clearError();
    } catch (f) {
      if (f.status === 404) showError('Document "' + id + '" not found: it does not exist or belongs to another tenant (404).');
      else if (f.status !== 401) showError('Cannot open document "' + id + '": ' + f.message);
    }
  }
  $('doc-view-close').addEventListener('click', () => { $('doc-view').hidden = true; });

  // ---- Live -------------------------------------------------------------------------------------
  let liveTimer = null;
  let lastRuns = null;   // {t, n}: runs counted at the previous refresh
  const rateHistory = [];

  function startLive() {
    if (liveTimer) return;
    refreshLive();
    liveTimer = setInterval(refreshLive, 2000);
  }
  function stopLive() {
    if (liveTimer) clearInterval(liveTimer);
    liveTimer = null;
  }

  // Prometheus text -> [{name, labels, value}].
  function parseMetrics(text) {
    const out = [];
    for (const line of text.split('\n')) {
      if (!line || line[0] === '#') continue;
      // Label values may hold braces (route="/v1/pipelines/{name}/runs"): the label set ends at the
      // last '}' of the line.
      const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(\s+\d+)?$/.exec(line);
      if (!m) continue;
      const labels = {};
      if (m[2]) for (const lm of m[2].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[lm[1]] = lm[2];
      out.push({ name: m[1], labels, value: Number(m[3]) });
    }
    return out;
  }

  // Entries per tier in the executor's stats: sums of numeric leaves named *entries or nodes
  // whose path names the tier (the daemon's /metrics uses the same path convention).
  function tierEntries(stats) {
    const sums = { hbm: 0, dram: 0, ssd: 0 };
    const walk = (v, path) => {
      if (v && typeof v === 'object') {
        for (const [k, x] of Object.entries(v)) walk(x, path ? path + '.' + k : k);
      } else if (typeof v === 'number') {
        const leaf = path.slice(path.lastIndexOf('.') + 1);
        if (!(leaf === 'nodes' || leaf === 'entries' || leaf.endsWith('_entries'))) return;
        for (const tier of TIERS) {
          const parts = path.split('.');
          if (parts.some((p) => p === tier || p.startsWith(tier + '_') || p.endsWith('_' + tier))) { sums[tier] += v; break; }
        }
      }
    };
    walk(stats, '');
    return sums;
  }

  async function refreshLive() {
    let stats = null;
    let metrics = [];
    try {
      const [s, m] = await Promise.all([api('/v1/cache/stats'), api('/metrics')]);
      stats = await s.json();
      metrics = parseMetrics(await m.text());
    } catch (f) {
      if (f.status !== 401) showError('Live view: ' + f.message);
      return;
    }
    const by = (name) => metrics.filter((x) => x.name === name);
    const tierVal = (name, tier) => {
      const x = by(name).find((r) => r.labels.tier === tier);
      return x ? x.value : NaN;
    };
    const entries = stats && stats.executor ? tierEntries(stats.executor) : null;
    const tbody = $('tiers').querySelector('tbody');
    tbody.replaceChildren(...TIERS.map((tier) => {
      const hits = tierVal('ragd_kv_cache_hits', tier);
      const misses = tierVal('ragd_kv_cache_misses', tier);
      const lookups = (hits || 0) + (misses || 0);
      const rate = lookups > 0 ? (100 * (hits || 0) / lookups).toFixed(1) + ' %' : '–';
      return el('tr', { 'data-tier': tier },
        el('th', { scope: 'row', text: tier.toUpperCase() }),
        el('td', { class: 'num', text: fmtBytes(tierVal('ragd_kv_cache_bytes', tier)) }),
        el('td', { class: 'num', text: entries ? fmtInt(entries[tier]) : '–' }),
        el('td', { class: 'num', text: fmtInt(hits) }),
        el('td', { class: 'num', text: fmtInt(misses) }),
        el('td', { class: 'num', text: rate }));
    }));
    $('live-note').textContent = stats && !stats.executor
      ? 'Entries need an admin key (this key sees only its own requests: ' + ((stats.requests || {}).in_flight || 0) + ' in flight).'
      : '';
    renderTtft(by('ragd_time_to_first_token_seconds_bucket'), by('ragd_time_to_first_token_seconds_sum'),
               by('ragd_time_to_first_token_seconds_count'));
    // Run rate: finished runs (every route and finish reason) per second between refreshes.
    const runs = by('ragd_runs_total').reduce((a, r) => a + r.value, 0);
    const now = performance.now();
    let rate = 0;
    if (lastRuns && now > lastRuns.t) rate = Math.max(0, runs - lastRuns.n) / ((now - lastRuns.t) / 1000);
    lastRuns = { t: now, n: runs };
    rateHistory.push(rate);
    while (rateHistory.length > 60) rateHistory.shift();
    $('req-rate').textContent = rate.toFixed(2);
    const peak = Math.max(...rateHistory, 0.001);
    $('rate-spark').replaceChildren(...rateHistory.map((r) => {
      const b = el('div', { class: 'bar', title: r.toFixed(2) + ' runs/s' });
      b.style.height = (100 * r / peak) + '%';
      return b;
    }));
    const g = (n) => { const x = by(n)[0]; return x ? x.value : 0; };
    $('req-gauges').textContent = 'running ' + g('ragd_requests_running') + ' · waiting ' + g('ragd_requests_waiting') +
      ' · ' + fmtInt(runs) + ' runs in all';
    $('live-updated').textContent = 'Updated ' + new Date().toLocaleTimeString();
  }

  function renderTtft(buckets, sum, count) {
    const hist = $('ttft-hist');
    const rows = buckets.map((b) => ({ le: b.labels.le === '+Inf' ? Infinity : Number(b.labels.le), c: b.value }))
      .sort((a, b) => a.le - b.le);
    const n = count.length ? count[0].value : 0;
    let prev = 0;
    const bins = rows.map((r) => { const v = r.c - prev; prev = r.c; return { le: r.le, v }; });
    // Show the buckets from the first to the last non-empty one (at least 6 for context).
    let lo = bins.findIndex((b) => b.v > 0);
    let hi = bins.length - 1 - [...bins].reverse().findIndex((b) => b.v > 0);
    if (lo < 0) { lo = 0; hi = Math.min(bins.length - 1, 5); }
    while (hi - lo < 5 && (lo > 0 || hi < bins.length - 1)) { if (hi < bins.length - 1) hi++; else lo--; }
    const shown = bins.slice(lo, hi + 1);
    const peak = Math.max(...shown.map((b) => b.v), 1);
    const label = (le) => (le === Infinity ? '+Inf' : le < 1 ? Math.round(le * 1000) + 'ms' : le + 's');
    hist.replaceChildren(...shown.map((b) => {
      const bar = el('div', { class: 'bar', title: '≤ ' + label(b.le) + ': ' + b.v });
      bar.style.height = (100 * b.v / peak) + '%';
      return bar;
    }));
    const labels = hist.nextElementSibling && hist.nextElementSibling.classList.contains('hist-labels')
      ? hist.nextElementSibling : el('div', { class: 'hist-labels', 'aria-hidden': 'true' });
    labels.replaceChildren(...shown.map((b) => el('span', { text: label(b.le) })));
    if (!labels.parentElement) hist.after(labels);
    const mean = n > 0 && sum.length ? (1000 * sum[0].value / n) : NaN;
    hist.setAttribute('aria-label', 'TTFT histogram of ' + n + ' runs' + (n ? ', mean ' + fmtMs(mean) : ''));
    $('ttft-summary').textContent = n ? n + ' runs · mean ' + fmtMs(mean) : 'No runs yet.';
  }

  // ---- Documents --------------------------------------------------------------------------------
  let docsAfter = '';
  async function loadDocuments(reset) {
    if (reset) docsAfter = '';
    const tbody = $('docs').querySelector('tbody');
    try {
      const q = '?limit=100' + (docsAfter ? '&after=' + encodeURIComponent(docsAfter) : '');
      const res = await api('/v1/documents' + q);
      const j = await res.json();
      if (reset) tbody.replaceChildren();
      for (const d of j.data || []) tbody.append(docRow(d));
      if (j.data && j.data.length) docsAfter = j.data[j.data.length - 1].id;
      $('docs-more').hidden = !j.has_more;
      $('docs-msg').textContent = tbody.children.length ? tbody.children.length + ' document(s) shown' : 'No documents yet.';
    } catch (f) {
      if (f.status !== 401) $('docs-msg').textContent = 'Cannot list documents: ' + f.message;
    }
  }
  $('docs-refresh').addEventListener('click', () => loadDocuments(true));
  $('docs-more').addEventListener('click', () => loadDocuments(false));

  function docRow(d) {
    const open = el('button', { type: 'button', text: 'View', 'aria-label': 'View ' + d.id });
    open.addEventListener('click', () => openDocument(d.id));
    const del = el('button', { type: 'button', class: 'danger', text: 'Delete', 'aria-label': 'Delete ' + d.id });
    del.addEventListener('click', () => deleteDocument(d.id, row));
    const row = el('tr', { 'data-id': d.id },
      el('td', { text: d.id }), el('td', { text: d.title || '' }), el('td', { text: d.shared ? 'shared' : 'own' }),
      el('td', { class: 'num', text: fmtInt(d.bytes) }), el('td', { class: 'num', text: fmtInt(d.chunks) }),
      el('td', {}, open, ' ', del));
    return row;
  }

  async function deleteDocument(id, row) {
    if (!confirm('Delete document "' + id + '"?')) return;
    try {
      await api('/v1/documents/' + encodeURIComponent(id), { method: 'DELETE' });
      row.remove();
      $('docs-msg').textContent = 'Deleted "' + id + '".';
    } catch (f) {
      let msg = f.message;
      if (f.status === 403) msg = 'shared documents are read-only to this key (403)';
      else if (f.status === 404) msg = 'not found: already deleted, or another tenant\'s document (404)';
      $('docs-msg').textContent = 'Cannot delete "' + id + '": ' + msg;
      showError('Cannot delete "' + id + '": ' + msg);
    }
  }

  $('open-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const id = $('open-id').value.trim();
    if (id) openDocument(id);
  });

  // Upload: files become documents; the file name is the id.
  const SUPPORTED = ['.txt', '.md', '.markdown', '.html', '.htm', '.json', '.jsonl'];
  const extOf = (name) => { const i = name.lastIndexOf('.'); return i < 0 ? '' : name.slice(i).toLowerCase(); };

  async function documentsOf(file) {
    const ext = extOf(file.name);
    if (!SUPPORTED.includes(ext)) throw new Error('unsupported type "' + (ext || file.type || 'no extension') + '": use ' + SUPPORTED.join(', '));
    const text = await file.text();
    if (text.includes('\u0000') || text.includes('\uFFFD')) throw new Error('unsupported type: the file is not UTF-8 text');
    const title = file.name.replace(/\.[^.]+$/, '');
    if (ext === '.json') {
      let j;
      try { j = JSON.parse(text); } catch (e) { throw new Error('not valid JSON: ' + e.message); }
      return j;  // a document, {"documents": [...]}, or a list: the server checks the shape
    }
    if (ext === '.jsonl') {
      const docs = [];
      text.split('\n').forEach((line, i) => {
        if (!line.trim()) return;
        try { docs.push(JSON.parse(line)); } catch (e) { throw new Error('line ' + (i + 1) + ' is not valid JSON'); }
      });
      return { documents: docs };
    }
    if (ext === '.html' || ext === '.htm') {
      const doc = new DOMParser().parseFromString(text, 'text/html');
      doc.querySelectorAll('script, style, noscript').forEach((n) => n.remove());
      const t = (doc.title || '').trim();
      return { id: file.name, title: t || title, text: (doc.body ? doc.body.textContent : '').replace(/\s+/g, ' ').trim(), source: file.name };
    }
    return { id: file.name, title, text, source: file.name };
  }

  function uploadBody(body, onProgress) {
    return new Promise((resolve) => {
      const xhr = new XMLHttpRequest();
      xhr.open('POST', '/v1/documents');
      xhr.setRequestHeader('Content-Type', 'application/json');
      const k = apiKey();
      if (k) xhr.setRequestHeader('Authorization', 'Bearer ' + k);
      xhr.upload.addEventListener('progress', (e) => { if (e.lengthComputable) onProgress(e.loaded / e.total); });
      xhr.addEventListener('load', () => {
        let j = null;
        try { j = JSON.parse(xhr.responseText); } catch (e) { /* empty */ }
        resolve({ status: xhr.status, json: j });
      });
      xhr.addEventListener('error', () => resolve({ status: 0, json: null }));
      xhr.send(body);
    });
  }

  async function uploadFile(file) {
    const progress = el('progress', { max: '1', value: '0', 'aria-label': 'upload of ' + file.name });
    const msg = el('span', { class: 'msg', text: 'reading…' });
    const li = el('li', { 'data-file': file.name }, el('span', { text: file.name + ' (' + fmtBytes(file.size) + ')' }), progress, msg);
    $('uploads').prepend(li);
    const fail = (text) => { msg.textContent = text; msg.className = 'msg err'; progress.remove(); li.dataset.state = 'error'; };
    let body;
    try {
      body = JSON.stringify(await documentsOf(file));
    } catch (e) {
      return fail(e.message);
    }
    msg.textContent = 'uploading…';
    const r = await uploadBody(body, (f) => { progress.value = f; });
    if (r.status === 200 && r.json) {
      const s = r.json;
      progress.value = 1;
      const parts = [s.ingested && s.ingested + ' new', s.replaced && s.replaced + ' replaced',
        s.unchanged && s.unchanged + ' unchanged', s.skipped && s.skipped + ' skipped'].filter(Boolean);
      msg.textContent = 'ingested: ' + (parts.join(', ') || 'nothing') + ' · ' + s.chunks + ' chunk(s)' +
        (s.skip_reasons && s.skip_reasons.length ? ' · ' + s.skip_reasons.join('; ') : '');
      msg.className = 'msg ' + (s.skipped ? 'err' : 'ok');
      li.dataset.state = 'done';
      loadDocuments(true);
      return;
    }
    const e = (r.json && r.json.error) || {};
    if (r.status === 413) return fail('Too large: ' + (e.message || 'the body is over the server\'s limit') + ' (413)');
    if (r.status === 0) return fail('The server closed the connection during the upload: the file is probably too large for server.max_body_bytes.');
    if (r.status === 401) { onUnauthorized(new ApiFailure(401, e.code, e.message || 'unauthorized')); return fail('Not authorised (401): ' + (e.message || '')); }
    if (r.status === 403) return fail('Refused (403): ' + (e.message || 'this key may not write that document'));
    return fail('Upload failed (' + r.status + ' ' + (e.code || '') + '): ' + (e.message || ''));
  }

  function uploadFiles(files) {
    for (const f of files) uploadFile(f);
  }
  const dz = $('drop-zone');
  dz.addEventListener('click', () => $('file-input').click());
  dz.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); $('file-input').click(); }
  });
  dz.addEventListener('dragover', (ev) => { ev.preventDefault(); dz.classList.add('over'); });
  dz.addEventListener('dragleave', () => dz.classList.remove('over'));
  dz.addEventListener('drop', (ev) => {
    ev.preventDefault();
    dz.classList.remove('over');
    if (ev.dataTransfer && ev.dataTransfer.files.length) uploadFiles(ev.dataTransfer.files);
  });
  $('file-input').addEventListener('change', (ev) => {
    uploadFiles(ev.target.files);
    ev.target.value = '';
  });

  connect();
})();
