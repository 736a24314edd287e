// The Annal overseer console. It calls annald's /v1 API with the session
// cookie (and the CSRF token on every state-changing request), so it can
// see and do exactly what the signed-in credential may through the API.
//
// Everything an agent wrote is hostile input. The page never builds HTML
// from strings: elements are made with createElement, text is set with
// textContent (the CSP requires Trusted Types, so an innerHTML would throw),
// and visible() shows direction-changing and invisible characters as
// escapes so that a target cannot reorder or hide what a person reads.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const state = { me: null, csrf: '', view: '', stream: null, holdsTimer: null, history: null, names: new Map() };

  // ---- safe rendering -------------------------------------------------

  // Bidi controls (LRE..RLO, LRI..PDI, LRM, RLM, ALM), C0/C1 controls other
  // than tab and newline, line/paragraph separators, zero-width and BOM.
  const hidden = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;
  const escape = (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0');
  function visible(s) { return String(s ?? '').replace(hidden, escape); }

  // el(tag, props, ...children): props are DOM properties (className,
  // type, title, onclick...) or data-* attributes; children are nodes or
  // strings, strings becoming text nodes after visible().
  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('data-') || k.startsWith('aria-') || k === 'role') e.setAttribute(k, String(v));
      else e[k] = v;
    }
    append(e, ...children);
    return e;
  }
  function append(parent, ...children) {
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      parent.append(c instanceof Node ? c : document.createTextNode(visible(c)));
    }
    return parent;
  }
  // An agent-written string, isolated from the text around it.
  const u = (s, cls) => el('bdi', { className: cls ? 'u ' + cls : 'u', title: visible(s) }, s);
  // An actor: its name (agent-written) and id.
  const who = (id) => {
    const name = state.names.get(id);
    return name && name !== id ? el('span', { className: 'actor-ref' }, u(name), el('code', { className: 'id' }, ' ' + visible(id))) : u(id || '—');
  };
  async function loadNames() {
    const actors = await getAll('/v1/actors').catch(() => []);
    for (const a of actors) state.names.set(a.id, a.name);
  }
  const clear = (node) => { node.replaceChildren(); return node; };

  // Pretty JSON, with hidden characters escaped as JSON escapes (the
  // meaning is the same; nothing is hidden).
  function prettyJSON(text) {
    try { return JSON.stringify(JSON.parse(text), null, 2).replace(hidden, escape); } catch { return visible(text); }
  }

  function flash(msg, bad) {
    const f = $('flash');
    f.textContent = visible(msg);
    f.className = bad ? 'flash bad' : 'flash';
    f.hidden = false;
    clearTimeout(flash.t);
    flash.t = setTimeout(() => { f.hidden = true; }, bad ? 8000 : 3500);
  }

  // ---- API --------------------------------------------------------------

  class APIError extends Error {
    constructor(status, body) { super(body.error || `HTTP ${status}`); this.status = status; this.body = body; }
  }

  async function call(method, path, body, links) {
    const opts = { method, credentials: 'same-origin', headers: {} };
    if (method !== 'GET') opts.headers['X-CSRF-Token'] = state.csrf;
    if (body !== undefined) { opts.headers['Content-Type'] = 'application/json'; opts.body = JSON.stringify(body); }
    const resp = await fetch(path, opts);
    if (resp.status === 204) return null;
    let data = null;
    try { data = await resp.json(); } catch { data = {}; }
    if (!resp.ok) {
      if (resp.status === 401 && path !== '/ui/session') signedOut('Your session has ended; sign in again.');
      throw new APIError(resp.status, data || {});
    }
    if (links) links.next = (/<([^>]*)>\s*;\s*rel="?next"?/.exec(resp.headers.get('Link') || '') || [])[1] || '';
    return data;
  }
  const get = (path) => call('GET', path);
  // getAll reads every page of a list endpoint (annald pages its lists,
  // naming the next page in a Link header).
  async function getAll(path) {
    const all = [];
    let next = path;
    for (let pages = 0; next && pages < 10000; pages++) {
      const links = {};
      const items = await call('GET', next, undefined, links);
      all.push(...items);
      next = items.length && links.next.startsWith(path.split('?')[0] + '?') ? links.next : '';
    }
    return all;
  }

  async function fetchBytes(path) {
    const resp = await fetch(path, { credentials: 'same-origin', cache: 'no-store' });
    if (!resp.ok) throw new AnnalVerify.VerifyError(`GET ${path}: HTTP ${resp.status}`);
    return new Uint8Array(await resp.arrayBuffer());
  }

  // ---- formatting -------------------------------------------------------

  function when(instant) {
    if (!instant) return '';
    const d = new Date(instant);
    return isNaN(d) ? visible(instant) : d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
  }
  function countdown(deadline) {
    if (!deadline) return { text: 'no timeout', urgent: false };
    const left = Math.round((new Date(deadline) - Date.now()) / 1000);
    if (left <= 0) return { text: 'timing out…', urgent: true };
    const m = Math.floor(left / 60), s = left % 60;
    return { text: m > 0 ? `${m} min ${String(s).padStart(2, '0')} s left` : `${s} s left`, urgent: left < 60 };
  }
  function outcomeOf(ev) {
    switch (ev.kind) {
      case 'action': return ev.decision?.outcome || 'committed';
      case 'action.denied': return 'denied';
      case 'hold.requested': return 'held';
      case 'hold.answered': return ev.hold?.decision || 'answered';
      default: return '';
    }
  }

  // ---- sign in / out ----------------------------------------------------

  function signedIn(sess) {
    state.me = sess.actor;
    state.csrf = sess.csrf;
    $('who').replaceChildren('Signed in as ', u(sess.actor.name || sess.actor.id), el('span', { className: 'kind' }, ` ${sess.actor.kind}`));
    $('signout').hidden = false;
    $('tabs').hidden = false;
    openStream();
    refreshHoldCount();
    loadNames().finally(() => show(location.hash.slice(1) || 'holds'));
  }

  function signedOut(msg) {
    state.me = null;
    state.csrf = '';
    if (state.stream) { state.stream.close(); state.stream = null; }
    $('tabs').hidden = true;
    $('signout').hidden = true;
    $('who').textContent = '';
    for (const v of document.querySelectorAll('.view')) v.hidden = true;
    $('view-signin').hidden = false;
    $('credential').focus();
    if (msg) { $('signin-error').textContent = msg; $('signin-error').hidden = false; }
  }

  $('signin-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    $('signin-error').hidden = true;
    try {
      const sess = await call('POST', '/ui/session', { credential: $('credential').value.trim() });
      $('credential').value = '';
      signedIn(sess);
    } catch (err) {
      $('signin-error').textContent = visible(err.message);
      $('signin-error').hidden = false;
    }
  });

  $('signout').addEventListener('click', async () => {
    try { await call('DELETE', '/ui/session'); } catch { /* signed out anyway */ }
    signedOut();
  });

  // ---- navigation -------------------------------------------------------

  const loaders = { holds: loadHolds, history: startHistory, agents: loadAgents, sessions: loadSessions, health: loadHealth, trust: loadTrustView };

  function show(view) {
    if (!loaders[view]) view = 'holds';
    state.view = view;
    if (location.hash !== '#' + view) history.replaceState(null, '', '#' + view);
    for (const v of document.querySelectorAll('.view')) v.hidden = v.id !== 'view-' + view;
    for (const b of document.querySelectorAll('#tabs button')) b.setAttribute('aria-current', b.dataset.view === view ? 'page' : 'false');
    loaders[view]().catch((err) => flash(err.message, true));
  }
  for (const b of document.querySelectorAll('#tabs button')) b.addEventListener('click', () => show(b.dataset.view));
  window.addEventListener('hashchange', () => { if (state.me) show(location.hash.slice(1)); });
  // Keyboard: g then h/y/a/s/l/t jumps to a view.
  let lastKey = '';
  document.addEventListener('keydown', (e) => {
    if (!state.me || e.target.closest('input, textarea, select, dialog')) return;
    if (lastKey === 'g') {
      const to = { h: 'holds', y: 'history', a: 'agents', s: 'sessions', l: 'health', t: 'trust' }[e.key];
      if (to) show(to);
    }
    lastKey = e.key;
  });

  // ---- live updates -----------------------------------------------------

  // One stream of every event the viewer may see: it refreshes the holds
  // inbox when a hold starts or ends and adds new events to the history.
  function openStream() {
    if (state.stream) state.stream.close();
    const es = new EventSource('/v1/events/stream');
    state.stream = es;
    const live = (on) => { for (const id of ['holds-live', 'history-live']) $(id).classList.toggle('off', !on); };
    es.onopen = () => live(true);
    es.onerror = () => live(false);
    es.addEventListener('event', (m) => {
      let item;
      try { item = JSON.parse(m.data); } catch { return; }
      const kind = item.event?.kind || '';
      if (kind === 'actor.created' && item.event.subject) state.names.set(item.event.subject.id, item.event.subject.name);
      if (kind.startsWith('hold.') || (kind === 'action' && item.event?.hold)) {
        refreshHoldCount();
        if (state.view === 'holds') loadHolds().catch(() => {});
      }
      if (state.history) state.history.live(item);
    });
  }

  // ---- holds ------------------------------------------------------------

  async function refreshHoldCount() {
    const pending = await get('/v1/holds?status=pending').catch(() => null);
    if (!pending) return;
    const badge = $('holds-count');
    badge.textContent = String(pending.length);
    badge.hidden = pending.length === 0;
  }

  async function loadHolds() {
    const all = await get('/v1/holds');
    const pending = all.filter((h) => h.status === 'pending');
    const done = all.filter((h) => h.status !== 'pending').slice(-15).reverse();
    $('holds-count').textContent = String(pending.length);
    $('holds-count').hidden = pending.length === 0;
    $('holds-empty').hidden = pending.length > 0;
    const list = clear($('holds-list'));
    for (const h of pending) list.append(holdCard(h));
    const tbody = clear($('holds-done'));
    $('holds-done').closest('table').hidden = done.length === 0;
    $('holds-done-title').hidden = done.length === 0;
    for (const h of done) {
      tbody.append(el('tr', {}, el('td', {}, el('code', {}, h.id)), el('td', {}, who(h.actor)),
        el('td', {}, el('span', { className: 'type' }, h.type), ' ', u(h.target, 'target')),
        el('td', {}, el('span', { className: 'pill ' + h.status }, h.status)), el('td', {}, who(h.answered_by)),
        el('td', { className: 'reason' }, visible(h.reason || ''))));
    }
    clearInterval(state.holdsTimer);
    state.holdsTimer = setInterval(() => {
      if (state.view !== 'holds') return;
      for (const c of document.querySelectorAll('[data-deadline]')) {
        const cd = countdown(c.dataset.deadline);
        c.textContent = cd.text;
        c.classList.toggle('urgent', cd.urgent);
      }
    }, 1000);
  }

  function holdCard(h) {
    const cd = countdown(h.deadline);
    const reason = el('input', { className: 'reason', placeholder: 'reason (logged with the answer)', 'aria-label': 'Reason' });
    const answer = (decision) => async () => {
      for (const b of card.querySelectorAll('button')) b.disabled = true;
      try {
        const rc = await call('POST', `/v1/holds/${encodeURIComponent(h.id)}/${decision}`, { reason: reason.value });
        flash(`Hold ${h.id} ${decision === 'approve' ? 'approved' : 'rejected'} (logged at index ${rc.index}).`);
        await loadHolds();
      } catch (err) {
        // A refusal the log records (an approval refused on re-check ends
        // the hold) says where; the hold is answered, so the card goes.
        const at = err.body && err.body.denial_index;
        if (at !== undefined && at !== null) {
          flash(`Hold ${h.id} not approved: ${err.message} (the refusal is logged at index ${at}).`, true);
          await loadHolds().catch(() => {});
          return;
        }
        flash(err.message, true);
        for (const b of card.querySelectorAll('button')) b.disabled = false;
      }
    };
    const human = state.me && state.me.kind === 'human';
    const rule = h.rule_envelope ? [u(h.rule_envelope), ' holds ', el('code', {}, visible(h.rule_pattern))] : ['—'];
    const card = el('article', { className: 'card hold', 'data-hold': h.id },
      el('div', { className: 'card-head' },
        el('span', { className: 'type' }, h.type), u(h.target, 'target big'),
        el('span', { className: 'spacer' }),
        el('span', { className: 'countdown' + (cd.urgent ? ' urgent' : ''), 'data-deadline': h.deadline || '' }, cd.text)),
      el('dl', { className: 'kv' },
        el('dt', {}, 'Agent'), el('dd', {}, who(h.actor)),
        el('dt', {}, 'Rule'), el('dd', {}, ...rule),
        el('dt', {}, 'Envelope'), el('dd', {}, u(h.envelope), ` — ${h.remaining} left, ${h.reserved} reserved for this action`),
        h.session ? el('dt', {}, 'Session') : null, h.session ? el('dd', {}, u(h.session)) : null,
        el('dt', {}, 'Requested'), el('dd', {}, `log index ${h.requested_at}`)),
      h.payload ? el('details', {}, el('summary', {}, h.sealed_subject ? `Payload (sealed, subject ${h.sealed_subject}: the log holds only its commitment)` : 'Payload'),
        el('pre', { className: 'json' }, prettyJSON(JSON.stringify(h.payload)))) : null,
      human ? el('div', { className: 'answer' }, reason,
        el('button', { type: 'button', className: 'primary', onclick: answer('approve') }, 'Approve'),
        el('button', { type: 'button', className: 'danger', onclick: answer('reject') }, 'Reject'))
        : el('p', { className: 'hint' }, 'Only a human overseer may answer a hold.'));
    return card;
  }

  // ---- history ----------------------------------------------------------

  function historyQuery() {
    const f = $('history-filters');
    const q = new URLSearchParams();
    for (const name of ['actor', 'envelope', 'session', 'kind', 'type', 'outcome', 'target']) {
      const v = f.elements[name].value.trim();
      if (v) q.set(name, v);
    }
    for (const name of ['since', 'until']) {
      const v = f.elements[name].value;
      if (v) q.set(name, new Date(v + 'Z').toISOString().replace(/\.\d+Z$/, 'Z'));
    }
    return q;
  }

  function matches(q, item) {
    const ev = item.event || {};
    if (q.get('actor') && ev.actor !== q.get('actor')) return false;
    if (q.get('session') && ev.session !== q.get('session')) return false;
    if (q.get('kind') && ev.kind !== q.get('kind')) return false;
    if (q.get('type') && ev.action?.type !== q.get('type')) return false;
    if (q.get('envelope') && ev.action?.envelope !== q.get('envelope') && ev.envelope?.id !== q.get('envelope')) return false;
    if (q.get('outcome') && outcomeOf(ev) !== q.get('outcome')) return false;
    if (q.get('target') && !(ev.action?.target || '').startsWith(q.get('target'))) return false;
    if (q.get('since') || q.get('until')) return false; // a live event is after "until" or needs no "since"
    return true;
  }

  async function startHistory() {
    if (state.history) { state.history.stop(); }
    const q = historyQuery();
    const rows = clear($('history-rows'));
    $('history-error').hidden = true;
    let cursor = null, loading = false, done = false, stopped = false;
    const more = $('history-more');
    const seen = new Set();
    const loadPage = async () => {
      if (loading || done || stopped) return;
      loading = true;
      more.textContent = 'Loading…';
      try {
        const pq = new URLSearchParams(q);
        pq.set('limit', '50');
        if (cursor !== null) pq.set('cursor', String(cursor));
        const page = await get('/v1/events?' + pq);
        for (const it of page.events) if (!seen.has(it.index)) { seen.add(it.index); rows.append(...eventRows(it)); }
        if (page.next_cursor === undefined || page.next_cursor === null) { done = true; more.textContent = rows.children.length ? 'The beginning of the log.' : 'No event matches.'; }
        else { cursor = page.next_cursor; more.textContent = 'Scroll for more'; }
      } catch (err) {
        $('history-error').textContent = visible(err.message);
        $('history-error').hidden = false;
        more.textContent = '';
        done = true;
      } finally { loading = false; }
      if (!done && more.getBoundingClientRect().top < innerHeight + 200) loadPage();
    };
    const observer = new IntersectionObserver((entries) => { if (entries.some((e) => e.isIntersecting)) loadPage(); }, { rootMargin: '200px' });
    observer.observe(more);
    state.history = {
      stop() { stopped = true; observer.disconnect(); },
      live(item) {
        if (stopped || seen.has(item.index) || !matches(q, item)) return;
        seen.add(item.index);
        const [row, detail] = eventRows(item);
        row.classList.add('fresh');
        rows.prepend(row, detail);
      },
    };
    await loadPage();
  }

  $('history-filters').addEventListener('submit', (e) => { e.preventDefault(); startHistory(); });
  $('history-filters').addEventListener('reset', () => setTimeout(startHistory, 0));

  function eventRows(item) {
    const ev = item.event || {};
    const action = ev.action ? [el('span', { className: 'type' }, ev.action.type), ' ', u(ev.action.target, 'target')]
      : ev.subject ? [u(ev.subject.name || ev.subject.id)] : [];
    const outcome = outcomeOf(ev);
    const detail = el('tr', { className: 'detail', hidden: true }, el('td', { colSpan: 6 }));
    const row = el('tr', { className: 'event', tabIndex: 0, 'data-index': item.index, 'aria-expanded': 'false' },
      el('td', { className: 'num' }, String(item.index)),
      el('td', { className: 'time' }, when(ev.time)),
      el('td', {}, el('code', {}, visible(ev.kind))),
      el('td', {}, who(ev.actor)),
      el('td', {}, ...action),
      el('td', {}, outcome ? el('span', { className: 'pill ' + outcome }, outcome) : ''));
    const toggle = () => {
      const open = detail.hidden;
      detail.hidden = !open;
      row.setAttribute('aria-expanded', String(open));
      if (open && !detail.firstChild.firstChild) fillDetail(detail.firstChild, item);
    };
    row.addEventListener('click', toggle);
    row.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); toggle(); }
      if (e.key === 'ArrowDown') { e.preventDefault(); row.nextElementSibling?.nextElementSibling?.focus(); }
      if (e.key === 'ArrowUp') { e.preventDefault(); row.previousElementSibling?.previousElementSibling?.focus(); }
    });
    return [row, detail];
  }

  // sealedPart shows a sealed payload: opened while the kernel holds it,
  // or marked erased; a human may erase its subject from here.
  function sealedPart(item) {
    const sealed = item.event?.action?.sealed;
    if (!sealed) return null;
    const part = el('div', { className: 'sealed' },
      el('p', {}, el('strong', {}, 'Sealed payload'), ' about subject ', el('code', {}, visible(sealed.subject)),
        '. The log holds only its salted commitment ', el('code', {}, visible(sealed.commitment)), '.'));
    if (item.erased) {
      part.append(el('p', { className: 'erased' }, 'Erased: the subject\'s key is destroyed and the payload is gone for good. Every proof still verifies.'));
    } else if (item.sealed_payload !== undefined) {
      part.append(el('pre', { className: 'json sealed-payload' }, prettyJSON(JSON.stringify(item.sealed_payload))));
    }
    if (!item.erased && state.me && state.me.kind === 'human') {
      const reason = el('input', { className: 'reason', placeholder: 'reason (logged; not personal data)', 'aria-label': 'Erasure reason' });
      const erase = el('button', { type: 'button', className: 'danger erase' }, `Erase subject ${sealed.subject}`);
      erase.addEventListener('click', async () => {
        // Two clicks, the second on a button that says what it does: an
        // erasure cannot be undone.
        if (!erase.classList.contains('armed')) {
          erase.classList.add('armed');
          erase.textContent = `Erase every sealed payload of ${sealed.subject} for good`;
          return;
        }
        erase.disabled = true;
        try {
          const rc = await call('POST', `/v1/subjects/${encodeURIComponent(sealed.subject)}/erase`, { reason: reason.value });
          flash(`Subject ${sealed.subject} erased (logged at index ${rc.index}).`);
          startHistory();
        } catch (err) {
          flash(err.message, true);
          erase.disabled = false;
        }
      });
      part.append(el('div', { className: 'erase-form' }, reason, erase));
    }
    return part;
  }

  // fillDetail shows the exact logged bytes of an event (fetched by index,
  // not the history page's copy) and offers to verify them.
  async function fillDetail(cell, item) {
    const raw = el('pre', { className: 'json raw' }, 'Loading…');
    const result = el('div', { className: 'verify-result' });
    const btn = el('button', { type: 'button', className: 'primary verify', onclick: () => verifyInPage(item.index, result, raw) }, 'Verify in this browser');
    append(cell,
      el('div', { className: 'detail-head' }, el('span', {}, `Event ${item.index} — leaf hash `, el('code', {}, visible(item.leaf_hash))), btn),
      result,
      sealedPart(item),
      el('p', { className: 'hint' }, 'The exact logged JSON (invisible and direction-changing characters are shown as \\u escapes):'),
      raw);
    try {
      const bytes = await fetchBytes(`/v1/events/${item.index}`);
      raw.textContent = visible(new TextDecoder().decode(bytes));
    } catch (err) { raw.textContent = visible(err.message); }
  }

  async function verifyInPage(index, out, raw) {
    clear(out).className = 'verify-result running';
    out.append(el('p', {}, 'Verifying…'));
    let trust;
    try {
      trust = await AnnalVerify.loadTrust(localStorage.getItem('annal.trust.key'), localStorage.getItem('annal.trust.policy'));
    } catch (err) {
      clear(out).className = 'verify-result bad';
      out.append(el('p', {}, el('strong', {}, 'Cannot verify: '), visible(err.message), ' ', el('a', { href: '#trust' }, 'Set what to trust')));
      return;
    }
    const seenKey = 'annal.seen.' + trust.log.vkey;
    const seen = JSON.parse(localStorage.getItem(seenKey) || 'null');
    try {
      const r = await AnnalVerify.verifyEvent(index, trust, fetchBytes, seen);
      localStorage.setItem(seenKey, JSON.stringify(r.seen));
      raw.textContent = visible(new TextDecoder().decode(r.entry));
      clear(out).className = 'verify-result ok';
      out.append(el('p', {}, el('strong', {}, 'Verified: '), `event ${index} is in the log the trusted key signs.`),
        el('ol', {}, ...r.steps.map((s) => el('li', {}, el('span', { className: 'check' }, '✓ '), s.name, el('span', { className: 'hint' }, ` — ${s.detail}`)))));
    } catch (err) {
      clear(out).className = 'verify-result bad';
      out.append(el('p', {}, el('strong', {}, 'Verification FAILED: '), visible(err.message)));
    }
  }

  // ---- agents and envelopes ---------------------------------------------

  async function loadAgents() {
    const [actors, envelopes, rings] = await Promise.all([getAll('/v1/actors'), getAll('/v1/envelopes'), getAll('/v1/rings').catch(() => [])]);
    const ringOf = new Map((rings || []).map((r) => [r.agent, r]));
    const byCreator = new Map();
    const ids = new Set(actors.map((a) => a.id));
    for (const a of actors) {
      const parent = a.creator && ids.has(a.creator) && a.creator !== a.id ? a.creator : '';
      if (!byCreator.has(parent)) byCreator.set(parent, []);
      byCreator.get(parent).push(a);
    }
    const envByHolder = new Map();
    for (const v of envelopes) {
      if (!envByHolder.has(v.holder)) envByHolder.set(v.holder, []);
      envByHolder.get(v.holder).push(v);
    }
    const tree = clear($('agents-tree'));
    const render = (parent, depth) => el('ul', { className: depth ? 'children' : 'roots' },
      ...(byCreator.get(parent) || []).map((a) => el('li', {}, actorCard(a, ringOf.get(a.id), envByHolder.get(a.id) || []),
        byCreator.has(a.id) && depth < 32 ? render(a.id, depth + 1) : null)));
    tree.append(render('', 0));
  }

  function actorCard(a, ring, envs) {
    const isAgent = a.kind === 'agent';
    const overseer = state.me && state.me.kind === 'human' && state.me.id !== a.id;
    const acts = [];
    if (isAgent && overseer) {
      if (a.status === 'active') acts.push(control(a, 'Freeze', 'status', { status: 'frozen' }, 'Freeze stops every action of this agent until it is made active again.'));
      if (a.status === 'frozen') acts.push(control(a, 'Unfreeze', 'status', { status: 'active' }, 'Make this agent active again.'));
      acts.push(control(a, 'Stop', 'signal', { signal: 'SIGSTOP' }, 'Send SIGSTOP: the agent is stopped until SIGCONT.'));
      acts.push(control(a, 'Quarantine', 'quarantine', {}, 'Quarantine isolates the agent: it may only observe.'));
      acts.push(control(a, 'Kill', 'kill', {}, 'Kill terminates the agent for good and revokes what it holds. This cannot be undone.', true));
    }
    return el('div', { className: 'actor card ' + a.status },
      el('div', { className: 'card-head' },
        el('span', { className: 'kind-tag ' + a.kind }, a.kind), u(a.name || a.id, 'big'), el('code', { className: 'id' }, visible(a.id)),
        el('span', { className: 'spacer' }), el('span', { className: 'pill ' + a.status }, a.status)),
      a.purpose ? el('p', { className: 'purpose' }, u(a.purpose)) : null,
      el('dl', { className: 'kv inline' },
        el('dt', {}, 'Balance'), el('dd', {}, `${a.balance} (${a.reserved} reserved, ${a.consumed} consumed)`),
        ring ? el('dt', {}, 'Ring') : null, ring ? el('dd', {}, `${ring.effective_ring} (base ${ring.base_ring})`) : null,
        ring ? el('dt', {}, 'Trust') : null, ring ? el('dd', {}, (ring.trust_bp / 10000).toFixed(2)) : null),
      envs.length ? el('table', { className: 'grid envelopes' },
        el('thead', {}, el('tr', {}, el('th', {}, 'Envelope'), el('th', {}, 'Delegated from'), el('th', {}, 'Budget'), el('th', {}, 'Left'), el('th', {}, 'Grants'), el('th', {}, 'Holds on'))),
        el('tbody', {}, ...envs.map((v) => el('tr', { className: v.revoked ? 'revoked' : '' },
          el('td', {}, el('code', {}, visible(v.id)), v.revoked ? ' (revoked)' : ''), el('td', {}, v.parent ? el('code', {}, visible(v.parent)) : who(v.issuer)),
          el('td', { className: 'num' }, String(v.budget)), el('td', { className: 'num' }, String(v.budget - v.consumed - v.reserved)),
          el('td', {}, grants(v.grants)), el('td', {}, grants(v.hold_on)))))) : null,
      acts.length ? el('div', { className: 'controls' }, ...acts) : null);
  }

  function grants(gs) {
    return el('ul', { className: 'grants' }, ...(gs || []).map((g) => el('li', {}, el('code', {}, visible(g.pattern)), ' ', (g.actions || []).join(', '))));
  }

  // The reasons the kill switch and quarantine take (Execution Control
  // §12.2, §13.1); a kill's own words go in its details.
  const killReasons = ['manual', 'behavioral_drift', 'rate_limit', 'ring_breach', 'quarantine_timeout', 'session_timeout'];
  const quarantineReasons = ['manual', 'behavioral_drift', 'liability_violation', 'ring_breach', 'rate_limit_exceeded', 'cascade_slash'];

  function control(a, label, what, body, text, danger) {
    return el('button', { type: 'button', className: danger ? 'danger' : '', onclick: async () => {
      const choices = what === 'kill' ? killReasons : what === 'quarantine' ? quarantineReasons : null;
      const answer = await confirmDialog(`${label} ${a.name || a.id}?`, text, choices, what !== 'quarantine');
      if (answer === null) return;
      const path = what === 'status' ? `/v1/actors/${encodeURIComponent(a.id)}/status` : `/v1/agents/${encodeURIComponent(a.id)}/${what}`;
      const req = { ...body };
      if (what === 'kill') Object.assign(req, { reason: answer.choice, details: answer.text || undefined });
      else if (what === 'quarantine') req.reason = answer.choice;
      else req.reason = answer.text;
      try {
        const out = await call('POST', path, req);
        const idx = out.index ?? out.receipt?.index;
        flash(`${label}: done${idx !== undefined ? ` (logged at index ${idx})` : ''}.`);
        loadAgents();
      } catch (err) { flash(err.message, true); }
    } }, label);
  }

  // confirmDialog asks to confirm, with a reason chosen from choices (if
  // given) and/or typed; it resolves to {choice, text}, or null.
  function confirmDialog(title, text, choices, freeText) {
    const d = $('confirm');
    $('confirm-title').textContent = visible(title);
    $('confirm-text').textContent = text;
    $('confirm-choice-box').hidden = !choices;
    clear($('confirm-choice')).append(...(choices || []).map((c) => el('option', { value: c }, c.replace(/_/g, ' '))));
    $('confirm-reason-box').hidden = !freeText;
    $('confirm-reason-label').textContent = choices ? 'Details (logged)' : 'Reason (logged)';
    $('confirm-reason').value = '';
    d.showModal();
    (choices ? $('confirm-choice') : $('confirm-reason')).focus();
    return new Promise((resolve) => {
      const done = (v) => { d.close(); $('confirm-form').onsubmit = null; $('confirm-cancel').onclick = null; d.oncancel = null; resolve(v); };
      $('confirm-form').onsubmit = (e) => { e.preventDefault(); done({ choice: $('confirm-choice').value, text: $('confirm-reason').value.trim() }); };
      $('confirm-cancel').onclick = () => done(null);
      d.oncancel = () => done(null);
    });
  }

  // ---- sessions ---------------------------------------------------------

  async function loadSessions() {
    const list = await getAll('/v1/sessions');
    $('sessions-empty').hidden = list.length > 0;
    const ul = clear($('sessions-list'));
    list.sort((a, b) => (b.created_index || 0) - (a.created_index || 0));
    for (const s of list) {
      const b = el('button', { type: 'button', onclick: () => showSession(s.session_id) },
        u(s.session_id), el('span', { className: 'pill ' + String(s.state).toLowerCase() }, visible(s.state)));
      ul.append(el('li', {}, b));
    }
    if (list.length && !$('session-detail').firstChild) showSession(list[0].session_id);
  }

  async function showSession(id) {
    const detail = clear($('session-detail'));
    const [s, deltas] = await Promise.all([get(`/v1/sessions/${encodeURIComponent(id)}`), get(`/v1/sessions/${encodeURIComponent(id)}/deltas`)]);
    const parts = Object.entries(s.participants || {});
    const preview = el('div', { className: 'rollback' });
    detail.append(
      el('h2', {}, 'Session ', u(s.session_id)),
      el('dl', { className: 'kv' },
        el('dt', {}, 'State'), el('dd', {}, el('span', { className: 'pill ' + String(s.state).toLowerCase() }, visible(s.state))),
        el('dt', {}, 'Creator'), el('dd', {}, who(s.creator)),
        el('dt', {}, 'Created'), el('dd', {}, when(s.created_at)),
        el('dt', {}, 'Participants'), el('dd', {}, parts.length ? el('ul', { className: 'plain' }, ...parts.map(([id, p]) => el('li', {}, who(id), el('span', { className: 'hint' },
          ` — ring ${p.ring}, joined ${when(p.joined_at)}${p.is_active ? '' : ', left'}`)))) : 'none')),
      el('h3', {}, `Delta chain (${deltas.length} ${deltas.length === 1 ? 'turn' : 'turns'})`),
      deltas.length ? el('ol', { className: 'turns' }, ...deltas.map((d) => el('li', {},
        el('div', { className: 'turn-head' }, 'Turn ', u(d.delta.turn_id), el('span', { className: 'hint' }, ` by `), who(d.delta.agent_did),
          el('span', { className: 'hint' }, ` at ${when(d.delta.timestamp)}, log index ${d.index}`),
          el('button', { type: 'button', className: 'quiet', onclick: () => rollbackPreview(id, d.delta.turn_id, preview) }, 'Preview rollback to here')),
        el('ul', { className: 'changes' }, ...(d.delta.changes || []).map((c) => el('li', {},
          el('span', { className: 'op ' + c.operation }, visible(c.operation)), ' ', u(c.path, 'target'),
          c.content_hash ? el('code', { className: 'hash' }, ' ' + visible(c.content_hash).slice(0, 16) + '…') : null)))))) : el('p', { className: 'empty' }, 'No turn recorded yet.'),
      preview);
  }

  async function rollbackPreview(id, turn, out) {
    clear(out);
    try {
      const plan = await get(`/v1/sessions/${encodeURIComponent(id)}/rollback?turn=${encodeURIComponent(turn)}`);
      const files = Object.entries(plan.files || {});
      out.append(el('h3', {}, 'Rollback preview to turn ', u(turn)),
        el('p', { className: 'hint' }, 'Nothing is changed: this is what rolling back would do.'),
        el('h4', {}, `Files after that turn (${files.length})`),
        el('ul', { className: 'changes' }, ...files.map(([p, h]) => el('li', {}, u(p, 'target'), el('code', { className: 'hash' }, ' ' + visible(h).slice(0, 16) + '…')))),
        el('h4', {}, `Changes that would restore it (${(plan.undo || []).length})`),
        el('ul', { className: 'changes' }, ...(plan.undo || []).map((c) => el('li', {}, el('span', { className: 'op ' + c.operation }, visible(c.operation)), ' ', u(c.path, 'target')))));
    } catch (err) { out.append(el('p', { className: 'error' }, visible(err.message))); }
  }

  // ---- log health -------------------------------------------------------

  async function loadHealth() {
    const h = await get('/v1/health');
    const age = h.checkpoint_age_seconds < 0 ? 'none published yet' : `${h.checkpoint_age_seconds.toFixed(1)} s ago`;
    clear($('health-facts')).append(
      el('dt', {}, 'Origin'), el('dd', {}, el('code', {}, visible(h.origin))),
      el('dt', {}, 'State'), el('dd', {}, h.ready ? el('span', { className: 'pill committed' }, 'taking writes') : el('span', { className: 'pill denied' }, 'not ready: ' + visible(h.not_ready))),
      el('dt', {}, 'Entries'), el('dd', {}, String(h.size)),
      el('dt', {}, 'Checkpoint'), el('dd', {}, `size ${h.checkpoint_size}, published ${age}`),
      el('dt', {}, 'Witness quorum'), el('dd', {}, visible(h.quorum || 'none')));
    $('health-nowitness').hidden = h.witnesses.length > 0;
    const proofs = h.witnesses.reduce((n, w) => n + w.evidence.length, 0);
    const problems = h.witness_problems || [];
    $('health-alarm').hidden = proofs === 0 && problems.length === 0;
    $('health-alarm').textContent = proofs > 0
      ? `Witnesses hold ${proofs} proof(s) that this log showed two different histories. ` +
        'Treat the log as compromised: keep the evidence files and compare what each witness cosigned.'
      : 'No checkpoint can be published: ' + visible(problems.join('; '));
    const tbody = clear($('health-witnesses'));
    for (const w of h.witnesses) {
      const ev = w.evidence.length
        ? el('div', { className: 'alarm' }, el('strong', {}, `${w.evidence.length} proof(s) that this log showed two histories`),
          el('ul', {}, ...w.evidence.map((e) => el('li', {}, `sizes ${e.sizes[0]} and ${e.sizes[1]}, found ${when(e.found_at)} by ${visible(e.source)}: `, el('code', {}, visible(e.url))))))
        : w.evidence_error ? el('span', { className: 'hint' }, 'unknown: ' + visible(w.evidence_error)) : el('span', { className: 'pill committed' }, 'none');
      tbody.append(el('tr', {}, el('td', {}, u(w.name), el('br', {}), el('code', { className: 'id' }, visible(w.url))),
        el('td', { className: 'num' }, w.last_cosigned_at ? String(w.last_cosigned_size) : '—'),
        el('td', {}, w.last_cosigned_at ? when(w.last_cosigned_at) : 'not yet'), el('td', {}, ev)));
    }
  }

  // ---- trust ------------------------------------------------------------

  async function loadTrustView() {
    $('trust-key').value = localStorage.getItem('annal.trust.key') || '';
    $('trust-policy').value = localStorage.getItem('annal.trust.policy') || '';
    const info = await get('/v1/info');
    $('trust-server-key').textContent = visible(info.verifier_key);
    $('trust-use-server').onclick = () => { $('trust-key').value = info.verifier_key; };
  }

  $('trust-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const key = $('trust-key').value.trim(), policy = $('trust-policy').value;
    try {
      await AnnalVerify.loadTrust(key, policy);
      localStorage.setItem('annal.trust.key', key);
      localStorage.setItem('annal.trust.policy', policy);
      $('trust-status').textContent = 'Saved. Events are now verified against this key' + (policy.trim() ? ' and policy.' : '.');
    } catch (err) {
      $('trust-status').textContent = 'Not saved: ' + visible(err.message);
    }
  });

  // ---- start ------------------------------------------------------------

  call('GET', '/ui/session').then(signedIn, () => signedOut());
})();
