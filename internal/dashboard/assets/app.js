// provisiond dashboard: follows /dashboard/events (server-sent events) and
// draws the model. No library; the DOM is built from text nodes only (the
// page's Content-Security-Policy requires Trusted Types, so no HTML string
// is ever parsed).
'use strict';
(function () {
  const byId = (id) => document.getElementById(id);
  const SVG = 'http://www.w3.org/2000/svg';

  // el('td', {class: 'x', text: 'y'}, child, ...)
  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'text') e.textContent = v;
      else if (k === 'class') e.className = v;
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children) {
      if (c === undefined || c === null || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  const view = {
    model: new URLSearchParams(location.search).get('model') || '',
    offset: 0,          // server clock minus ours, in ms
    snap: null,
    models: [],
    rows: new Map(),    // row key -> signature, to mark what changed
    first: true,
    activity: [],       // newest first
    timeline: [],       // the model's history, newest first
    timelineOldest: null, // where the history kept begins, when the timeline reaches it
    entity: null,       // the entity whose history is open: {kind, id, changes}
    samples: [],
    gotHello: false,
  };
  let es = null;

  // ---- time

  function serverNow() { return Date.now() + view.offset; }

  function ago(iso) {
    const t = Date.parse(iso);
    if (isNaN(t)) return '';
    let s = Math.max(0, Math.round((serverNow() - t) / 1000));
    if (s < 60) return s + 's';
    let m = Math.floor(s / 60); s %= 60;
    if (m < 60) return m + 'm ' + s + 's';
    let h = Math.floor(m / 60); m %= 60;
    if (h < 48) return h + 'h ' + m + 'm';
    return Math.floor(h / 24) + 'd ' + (h % 24) + 'h';
  }

  // utcTime shows a time as "2026-01-02 15:04:05 UTC": 24-hour, with the
  // date, the same on every operator's screen.
  function utcTime(iso) {
    const t = new Date(iso);
    if (isNaN(t)) return '';
    return t.toISOString().slice(0, 19).replace('T', ' ') + ' UTC';
  }

  function since(iso) {
    if (!iso) return null;
    return el('span', {class: 'since', 'data-since': iso, text: 'for ' + ago(iso)});
  }

  function tickSince() {
    for (const e of document.querySelectorAll('[data-since]')) {
      e.textContent = 'for ' + ago(e.getAttribute('data-since'));
    }
  }

  // ---- statuses

  const errorStatuses = new Set(['error', 'provisioning error', 'down', 'lost', 'failed', 'blocked', 'terminated']);
  const warnStatuses = new Set(['pending', 'allocating', 'waiting', 'provisioning', 'attaching', 'detaching', 'unknown']);
  const okStatuses = new Set(['started', 'running', 'active', 'attached', 'idle', 'alive', 'ok', 'up']);

  function level(s) {
    if (errorStatuses.has(s)) return 'error';
    if (warnStatuses.has(s) || s === 'dying' || s === 'dead' || s === 'detached' || s === 'orphaned') return 'warn';
    if (okStatuses.has(s)) return 'ok';
    return '';
  }

  function badge(s) {
    if (!s) return '-';
    return el('span', {class: 'badge ' + level(s), text: s});
  }

  function statusCell(st) {
    if (!st || !st.status) return el('td', {text: '-'});
    return el('td', {}, badge(st.status), since(st.since));
  }

  // ---- tables

  // table(id, caption, headers, rows): rows are {key, cells: [td|string], level}
  function table(containerId, caption, headers, rows, emptyText) {
    const box = byId(containerId);
    box.replaceChildren();
    if (rows.length === 0) {
      box.append(el('p', {class: 'empty', text: emptyText}));
      return;
    }
    const thead = el('thead', {}, el('tr', {}, ...headers.map((h) => el('th', {scope: 'col', text: h}))));
    const tbody = el('tbody');
    for (const r of rows) {
      const sig = JSON.stringify(r.sig);
      const fresh = !view.first && view.rows.get(r.key) !== sig;
      view.rows.set(r.key, sig);
      const cls = [r.level || '', fresh ? 'fresh' : ''].join(' ').trim();
      const tr = el('tr', {class: cls || null, 'data-key': r.key});
      for (const c of r.cells) tr.append(c instanceof Node ? c : el('td', {text: c === '' || c == null ? '-' : c}));
      tbody.append(tr);
    }
    box.append(el('table', {}, el('caption', {class: 'sr-only', text: caption}), thead, tbody));
  }

  function alertLevel(kind, id) {
    const a = (view.snap && view.snap.alerts || []).find((a) => a.kind === kind && a.id === id);
    return a ? a.level : '';
  }

  // A message longer than this is shown cut, with the whole of it one
  // click (or Enter) away and in the tooltip.
  const msgShown = 100;

  function msgText(text) {
    if (text.length <= msgShown && !text.includes('\n')) return el('span', {class: 'msg-text', text: text});
    const cut = text.split('\n')[0].slice(0, msgShown).trimEnd() + '…';
    return el('details', {class: 'msg-text', title: text}, el('summary', {text: cut}), el('p', {class: 'msg-full', text: text}));
  }

  // msgCell(['agent', status], ['instance', status], ...): each different
  // message once; labelled by whose it is when there are several.
  function msgCell(...pairs) {
    const seen = new Map();
    for (const [who, st] of pairs) {
      if (!st || !st.message) continue;
      if (seen.has(st.message)) seen.get(st.message).push(who);
      else seen.set(st.message, [who]);
    }
    if (seen.size === 0) return el('td', {class: 'msg', text: '-'});
    const td = el('td', {class: 'msg'});
    for (const [text, whos] of seen) {
      const line = el('div', {class: 'msg-line'});
      if (seen.size > 1) line.append(el('span', {class: 'msg-who', text: whos.join(', ') + ': '}));
      line.append(msgText(text));
      td.append(line);
    }
    return td;
  }

  function renderMachines(st) {
    const rows = [];
    const walk = (m, depth) => {
      rows.push({
        key: 'machine/' + m.id, level: alertLevel('machine', m.id), sig: m,
        cells: [
          el('td', {class: depth === 1 ? 'child' : depth > 1 ? 'grandchild' : null},
            el('span', {class: 'mono', text: (depth ? '↳ ' : '') + m.id})),
          el('td', {}, badge(m.life), m['marked-for-removal'] ? el('span', {class: 'badge warn', text: 'marked for removal'}) : false),
          statusCell(m['agent-status']),
          el('td', {class: 'mono', text: m['instance-id'] || '-'}),
          statusCell(m['instance-status']),
          m.base || m.series || '-',
          (m.addresses || []).join(', '),
          msgCell(['agent', m['agent-status']], ['instance', m['instance-status']], ['modification', m['modification-status']]),
          historyButton('machine', m.id),
        ],
      });
      for (const c of m.containers || []) walk(c, depth + 1);
    };
    for (const m of st.machines || []) walk(m, 0);
    table('machines', 'Machines, with containers under their host', ['Machine', 'Life', 'Agent', 'Instance ID', 'Instance', 'Base', 'Addresses', 'Message', 'History'], rows,
      st.type === 'caas' ? 'A Kubernetes model has no machines.' : 'No machines.');
  }

  function renderApplications(st) {
    const apps = st.applications || [];
    table('applications', 'Applications', ['Application', 'Life', 'Charm', 'Scale', 'Units', 'Address', 'Status', 'Message'],
      apps.map((a) => ({
        key: 'application/' + a.name, level: alertLevel('application', a.name),
        sig: {l: a.life, s: a.scale, u: (a.units || []).length, o: a['operator-status'], ad: a.addresses},
        cells: [a.name, el('td', {}, badge(a.life)), a.charm, st.type === 'caas' ? String(a.scale) : '-',
          String((a.units || []).length), (a.addresses || []).join(', '), statusCell(a['operator-status']), msgCell(['operator', a['operator-status']])],
      })), 'No applications.');
    const rows = [];
    for (const a of apps) {
      for (const u of a.units || []) {
        rows.push({
          key: 'unit/' + u.name, level: alertLevel('unit', u.name), sig: u,
          cells: [u.name, el('td', {}, badge(u.life)), u.machine || '-', el('td', {class: 'mono', text: u['provider-id'] || '-'}),
            u.address || '-', statusCell(u['workload-status']), statusCell(u['container-status'] && u['container-status'].status ? u['container-status'] : u['agent-status']),
            msgCell(['workload', u['workload-status']], ['container', u['container-status']], ['agent', u['agent-status']]),
            historyButton('unit', u.name)],
        });
      }
    }
    table('units', 'Units', ['Unit', 'Life', 'Machine', 'Provider ID', 'Address', 'Workload', 'Container / agent', 'Message', 'History'], rows, 'No units.');
  }

  // The storage rows come laid out by the daemon (storage.go), with the
  // values provisionctl status shows: a storage instance attached to no
  // unit is "detached", a filesystem or volume that belongs to no storage
  // instance and is attached to nothing is "orphaned"; both stay until
  // remove-storage or remove-model takes them out.
  function renderStorage(rows, pools) {
    table('storage', 'Storage instances, leftover filesystems and volumes, machine volumes',
      ['Storage', 'Kind', 'Attached to', 'Life', 'Pool', 'Size', 'Filesystem', 'Volume', 'Status', 'Location', 'Message'],
      (rows || []).map((r) => ({
        key: r.key, level: r.level, sig: r,
        cells: [el('td', {class: 'mono', text: r.id}), r.kind,
          el('td', {'data-state': r.state}, r.state === 'attached' ? r.to : badge(r.state)), el('td', {}, badge(r.life)),
          r.pool, r.size, el('td', {class: 'mono', text: r.filesystem || '-'}), el('td', {class: 'mono', text: r.volume || '-'}),
          statusCell(r.status), r.location, msgCell(['status', r.status])],
      })), 'No storage.');
    table('pools', 'Storage pools', ['Pool', 'Provider', 'Attributes'], (pools || []).map((p) => ({
      key: 'pool/' + p.name, sig: p,
      cells: [p.name, p.provider, Object.entries(p.attrs || {}).map(([k, v]) => k + '=' + v).join(' ') || '-'],
    })), 'No storage pools.');
  }

  function renderNetwork(st) {
    table('spaces', 'Spaces', ['Space', 'Provider ID', 'Subnets'], (st.spaces || []).map((s) => ({
      key: 'space/' + s.name, sig: s, cells: [s.name, s['provider-id'] || '-', (s.subnets || []).join(', ')],
    })), 'No spaces.');
    table('subnets', 'Subnets', ['Subnet', 'Space', 'Zones', 'Provider ID', 'VLAN', 'Range', 'In use', 'Life'], (st.subnets || []).map((s) => ({
      key: 'subnet/' + s.cidr, level: alertLevel('subnet', s.cidr), sig: s,
      cells: [el('td', {class: 'mono', text: s.cidr}), s.space || '-', (s.zones || []).join(', '), s['provider-id'] || '-',
        s['vlan-tag'] ? String(s['vlan-tag']) : '-',
        s['allocatable-ip-low'] ? s['allocatable-ip-low'] + '–' + s['allocatable-ip-high'] : '-',
        String((s.addresses || []).filter((a) => a.state === 'allocated').length), el('td', {}, badge(s.life))],
    })), 'No subnets.');
  }

  function renderAttention(snap) {
    const list = byId('attention');
    list.replaceChildren();
    const alerts = snap.alerts || [];
    byId('attention-count').textContent = alerts.length ? '(' + alerts.length + ')' : '';
    if (alerts.length === 0) {
      list.append(el('li', {class: 'none', text: 'Nothing is in an error or stuck state.'}));
      return;
    }
    for (const a of alerts) {
      list.append(el('li', {class: a.level},
        el('strong', {text: (a.level === 'error' ? 'Error: ' : '') + a.kind + ' ' + a.id}),
        ' is ' + a.status, a.since ? ' ' : '', since(a.since), a.message ? ': ' : '', a.message ? msgText(a.message) : false));
    }
  }

  function renderModelHead(snap) {
    const head = byId('model-head');
    head.replaceChildren();
    const m = snap.model || {};
    head.className = 'model-head';
    head.append(el('h2', {text: m.name || 'Model'}), badge(m.type), badge(m.life), el('span', {class: 'mono muted', text: m.uuid}));
    document.title = (m.name ? m.name + ' · ' : '') + 'provisiond';
    if (snap.error) head.append(el('p', {class: 'notice', role: 'alert', text: snap.error}));
    // No provisioner agent connected while the model has work waiting.
    const b = snap.banner;
    if (b) {
      head.append(el('p', {class: 'banner', id: 'provisioner-banner', role: 'alert'},
        el('strong', {text: 'Provisioner agent down. '}), b.message, b.since ? ' ' : '', since(b.since)));
    }
  }

  function renderSnapshot(snap) {
    view.snap = snap;
    view.offset = Date.parse(snap.now) - Date.now();
    renderModelHead(snap);
    renderAttention(snap);
    const st = snap.status || {};
    renderMachines(st);
    renderApplications(st);
    renderStorage(snap.storage, snap.pools);
    renderNetwork(st);
    view.first = false;
  }

  function renderModels() {
    const ul = byId('models');
    ul.replaceChildren();
    for (const m of view.models) {
      const a = el('a', {href: '?model=' + encodeURIComponent(m.uuid), 'data-model': m.uuid,
        'aria-current': m.uuid === view.model ? 'page' : null}, m.name, el('span', {class: 'type', text: m.type + (m.life !== 'alive' ? ', ' + m.life : '')}));
      ul.append(el('li', {}, a));
    }
  }

  // ---- activity

  function describeChange(c) {
    const f = c.fields || [];
    if (f.includes('created')) return 'added';
    if (f.includes('removed')) return 'removed';
    // A field may carry a value ("hash:…"): its name is enough here.
    return f.length ? f.map((x) => x.split(':')[0]).join(', ') : 'changed';
  }

  function renderActivity() {
    const ol = byId('activity');
    ol.replaceChildren();
    if (view.activity.length === 0) {
      ol.append(el('li', {class: 'muted', text: 'No changes since the daemon started.'}));
      return;
    }
    for (const c of view.activity) {
      ol.append(el('li', {}, el('time', {datetime: c.time, text: utcTime(c.time)}),
        el('span', {class: 'what', title: c.name ? c.id : null, text: c.kind + ' ' + (c.name || c.id)}), ' ' + describeChange(c)));
    }
  }

  // ---- history

  // The daemon words each change as provisionctl history does (who,
  // call, entity, what); the page only lays the parts out, as text.
  function historyLine(c) {
    return el('li', {'data-rev': c.rev},
      el('span', {class: 'rev mono', text: String(c.rev)}), el('time', {datetime: c.time, text: utcTime(c.time)}),
      el('div', {class: 'hist-who mono', text: c.who}),
      el('div', {}, el('span', {class: 'hist-call', text: c.call}), ' ', el('span', {class: 'hist-entity mono', text: c.entity})),
      el('div', {class: 'hist-what mono'}, msgText(c.what)));
  }

  function renderHistoryList(ol, changes, emptyText) {
    ol.replaceChildren();
    if (changes.length === 0) {
      ol.append(el('li', {class: 'muted', text: emptyText}));
      return;
    }
    for (const c of changes) ol.append(historyLine(c));
  }

  const historyShown = 50;

  // keptFrom says where the history kept begins, when a panel's changes
  // reach back to it (fewer than it shows): nothing older is kept.
  function keptFrom(ol, oldest, changes) {
    if (!oldest || changes.length >= historyShown) return;
    ol.append(el('li', {class: 'muted hist-oldest', text: 'The history kept begins at revision ' + oldest.rev +
      ' (' + utcTime(oldest.time) + '); nothing older is kept.'}));
  }

  function renderTimeline() {
    const ol = byId('timeline');
    if (!ol) return;
    renderHistoryList(ol, view.timeline, 'No changes in the recent history.');
    keptFrom(ol, view.timelineOldest, view.timeline);
  }

  function historyButton(kind, id) {
    return el('td', {}, el('button', {type: 'button', class: 'hist-btn', 'data-history-kind': kind, 'data-history-id': id,
      'aria-label': 'History of ' + kind + ' ' + id, text: 'History'}));
  }

  function renderEntityHistory() {
    const sec = byId('entity-history-section');
    const e = view.entity;
    sec.hidden = !e;
    if (!e) return;
    byId('entity-history-title').textContent = 'History of ' + e.kind + ' ' + e.id;
    byId('entity-history-note').textContent = e.error || (e.loading ? 'Loading…' : 'Its last changes, newest first.');
    renderHistoryList(byId('entity-history'), e.changes, e.loading ? '' : 'No changes in the recent history.');
    if (!e.loading) keptFrom(byId('entity-history'), e.oldest, e.changes);
  }

  async function openEntityHistory(kind, id) {
    view.entity = {kind: kind, id: id, changes: [], loading: true};
    renderEntityHistory();
    byId('entity-history-section').focus();
    const q = '?model=' + encodeURIComponent(view.model) + '&kind=' + encodeURIComponent(kind) + '&id=' + encodeURIComponent(id);
    let h;
    try {
      const r = await fetch('/dashboard/history' + q, {credentials: 'same-origin', cache: 'no-store'});
      if (!r.ok) throw new Error(r.status + ' ' + (await r.text()));
      h = await r.json();
    } catch (err) {
      h = {changes: [], error: 'The history could not be read: ' + err.message};
    }
    const e = view.entity;
    if (!e || e.kind !== kind || e.id !== id) return; // another was opened meanwhile
    // Changes the stream brought while it loaded come first.
    const newest = h.changes.length ? h.changes[0].rev : 0;
    e.changes = e.changes.filter((c) => c.rev > newest).concat(h.changes).slice(0, historyShown);
    e.error = h.error || '';
    e.oldest = h.oldest || null;
    e.loading = false;
    renderEntityHistory();
  }

  function closeEntityHistory() {
    view.entity = null;
    renderEntityHistory();
  }

  function onHistory(h) {
    if (h.reset) {
      view.timeline = [];
      view.timelineOldest = h.oldest || null;
    }
    view.timeline = h.changes.concat(view.timeline).slice(0, historyShown);
    const note = byId('timeline-note');
    if (note) note.textContent = h.error || '';
    renderTimeline();
    const e = view.entity;
    if (!e) return;
    if (h.reset && !e.loading) {
      openEntityHistory(e.kind, e.id);
      return;
    }
    const mine = h.changes.filter((c) => c.kind === e.kind && c.id === e.id);
    if (mine.length) {
      e.changes = mine.concat(e.changes).slice(0, historyShown);
      renderEntityHistory();
    }
  }

  // ---- chart

  // Rates and the commit latency are over the sample's window (the last
  // 10 s, sample.windowS); each chart has its scale (0 to its top, a
  // round number at or above the peak), the peak of the two minutes
  // shown and when it was.
  const charts = [
    {key: 'requestsPerS', title: 'Requests/s', rate: true, cls: 'm1', fmt: (v) => v.toFixed(v < 10 ? 1 : 0)},
    {key: 'loginsPerS', title: 'Logins/s', rate: true, cls: 'm2', fmt: (v) => v.toFixed(v < 10 ? 1 : 0)},
    {key: 'agents', title: 'Agents connected', cls: 'm3', fmt: (v) => String(Math.round(v))},
    {key: 'commitMs', title: 'Commit latency (ms)', rate: true, cls: 'm4', fmt: (v) => v.toFixed(v < 10 ? 2 : 1)},
  ];

  // niceTop is the least of 1, 2, 2.5 or 5 times a power of ten at or
  // above v (1 when v is 0).
  function niceTop(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v - 1e-12) return m * p;
    return 10 * p;
  }

  function utcClock(ms) { return new Date(ms).toISOString().slice(11, 19); }

  function renderMetrics() {
    const box = byId('metrics');
    box.replaceChildren();
    const w = 120, h = 36;
    const end = view.samples.length ? view.samples[view.samples.length - 1].t : Date.now();
    if (view.samples.length) box.setAttribute('data-last', String(end)); // the last sample's time (Unix ms)
    const win = view.samples.length ? Math.round(view.samples[view.samples.length - 1].windowS || 0) : 0;
    byId('metrics-window').textContent = win ? 'rates and latency over the last ' + win + ' s; charts: the last two minutes, UTC' : '';
    for (const c of charts) {
      const pts = view.samples.filter((s) => s[c.key] !== null && s[c.key] !== undefined);
      let peak = null;
      for (const p of pts) if (peak === null || p[c.key] > peak[c.key]) peak = p;
      const top = niceTop(peak ? peak[c.key] : 0);
      const last = pts.length ? pts[pts.length - 1][c.key] : null;
      const svg = document.createElementNS(SVG, 'svg');
      svg.setAttribute('viewBox', '0 0 ' + w + ' ' + h);
      svg.setAttribute('preserveAspectRatio', 'none');
      svg.setAttribute('role', 'img');
      svg.setAttribute('aria-label', c.title + ' over the last two minutes, scale 0 to ' + c.fmt(top) +
        (peak ? ', peak ' + c.fmt(peak[c.key]) + ' at ' + utcClock(peak.t) + ' UTC' : ', no data'));
      for (const y of [2, h / 2, h - 2]) { // gridlines: the top, the middle, 0
        const g = document.createElementNS(SVG, 'line');
        g.setAttribute('x1', '0'); g.setAttribute('x2', String(w));
        g.setAttribute('y1', String(y)); g.setAttribute('y2', String(y));
        g.setAttribute('class', 'grid');
        svg.append(g);
      }
      const line = document.createElementNS(SVG, 'polyline');
      line.setAttribute('points', pts.map((s) => {
        const x = w - (end - s.t) / 1000;
        const y = h - 2 - (s[c.key] / top) * (h - 4);
        return x.toFixed(1) + ',' + y.toFixed(1);
      }).join(' '));
      svg.append(line);
      const title = c.title + (c.rate && win ? ' · ' + win + ' s' : '');
      box.append(el('div', {class: 'metric ' + c.cls, 'data-metric': c.key},
        el('h3', {text: title}),
        el('div', {class: 'value', text: last === null ? (c.key === 'commitMs' ? 'no commits' : '-') : c.fmt(last)}),
        el('div', {class: 'plot'},
          el('div', {class: 'axis-y'}, el('span', {class: 'axis-top', text: c.fmt(top)}), el('span', {class: 'axis-zero', text: '0'})),
          svg),
        el('div', {class: 'axis-x'}, el('span', {text: '−2 min'}), el('span', {text: 'now'})),
        el('div', {class: 'peak', text: peak ? 'peak ' + c.fmt(peak[c.key]) + ' at ' + utcClock(peak.t) : 'peak -'})));
    }
  }

  // ---- the controller: its store and daemons

  function mib(bytes) { return (bytes / (1 << 20)).toFixed(1) + ' MiB'; }

  function renderCluster(c) {
    const box = byId('cluster');
    box.replaceChildren();
    const health = c.health === 'ok' ? badge('ok') : c.health ? el('span', {class: 'badge error', text: 'unhealthy'}) : '-';
    box.append(el('dl', {class: 'facts'},
      el('dt', {text: 'Store'}), el('dd', {id: 'cluster-store', text: c.store || '-'}),
      el('dt', {text: 'Revision'}), el('dd', {id: 'cluster-revision', class: 'mono', text: String(c.revision)}),
      el('dt', {text: 'Health'}), el('dd', {id: 'cluster-health', title: c.health || null}, health,
        c.health && c.health !== 'ok' ? el('div', {class: 'msg-full', text: c.health}) : false)));
    if (c.members && c.members.length) {
      box.append(el('h3', {text: 'etcd members'}), el('ul', {class: 'members', id: 'cluster-members'}, ...c.members.map((m) =>
        el('li', {'data-endpoint': m.endpoint}, el('span', {class: 'mono', text: m.endpoint}), ' ', badge(m.up ? 'up' : 'down'),
          m.dbSize ? ' ' + mib(m.dbSize) + (m.dbQuota ? ' of ' + mib(m.dbQuota) : '') : '',
          (m.alarms || []).length ? el('span', {class: 'badge error', text: m.alarms.join(', ')}) : false,
          m.err ? el('div', {class: 'msg-full', text: m.err}) : false))));
    }
    if (c.error) box.append(el('p', {class: 'notice', role: 'alert', text: c.error}));
    const servers = c.servers || [];
    box.append(el('h3', {text: servers.length === 1 ? '1 daemon' : servers.length + ' daemons'}));
    const ul = el('ul', {class: 'servers', id: 'cluster-servers'});
    for (const s of servers) {
      const agents = (s.agents || []).map((a) => {
        const parts = [];
        if ((a.machines || []).length) parts.push('machine' + (a.machines.length > 1 ? 's ' : ' ') + a.machines.join(', '));
        if (a.provisioner) parts.push('provisioner');
        return el('li', {'data-model': a.model}, el('strong', {text: a.model}), ': ' + parts.join(', '));
      });
      ul.append(el('li', {'data-server': s.id, class: s.self ? 'self' : null},
        el('div', {}, el('span', {class: 'mono', text: s.id}), s.self ? el('span', {class: 'badge ok', text: 'this daemon'}) : false),
        el('div', {class: 'muted mono', text: (s.addresses || []).join(', ')}),
        el('div', {class: 'muted', text: (s.version ? 'version ' + s.version + ', ' : '') + 'started ' + utcTime(s.started)}),
        s.connections !== undefined && s.connections !== null ? el('div', {class: 'muted', text: 'machine agent connections: ' + Math.round(s.connections)}) : false,
        agents.length ? el('ul', {class: 'agents'}, ...agents) : el('div', {class: 'muted', text: c.store === 'etcd' ? 'no agents connected' : ''})));
    }
    box.append(ul);
  }

  // ---- the stream

  function setConn(text) { byId('conn').textContent = text; }

  const endedBy = {
    'logout': 'logout', 'expired': 'expired', 'credentials changed': 'credentials',
    'replaced by a newer session': 'replaced', 'shutdown': 'shutdown',
  };

  function connect() {
    if (es) es.close();
    view.gotHello = false;
    const q = view.model ? '?model=' + encodeURIComponent(view.model) : '';
    es = new EventSource('/dashboard/events' + q);
    const on = (name, f) => es.addEventListener(name, (e) => f(JSON.parse(e.data)));
    on('hello', (h) => {
      view.gotHello = true;
      if (h.model) view.model = h.model;
      view.offset = Date.parse(h.now) - Date.now();
      byId('controller').textContent = 'controller ' + (h.controller || '').slice(0, 8);
      setConn('Live');
    });
    on('models', (ms) => { view.models = ms; renderModels(); });
    on('status', renderSnapshot);
    on('cluster', renderCluster);
    on('history', onHistory);
    on('activity', (a) => {
      for (const c of a.changes) view.activity.unshift(c);
      view.activity.length = Math.min(view.activity.length, 50);
      renderActivity();
    });
    on('metrics', (ss) => {
      view.samples.push(...ss);
      const cut = ss.length ? ss[ss.length - 1].t - 120000 : 0;
      view.samples = view.samples.filter((s) => s.t > cut);
      renderMetrics();
    });
    on('bye', (b) => {
      es.close();
      if (b.reason === 'shutdown') {
        setConn('The daemon is shutting down; reconnecting…');
        setTimeout(connect, 2000);
      } else if (b.reason === 'replaced by a newer stream') {
        setConn('Paused: this session opened the page elsewhere. Reload to follow here.');
      } else {
        location.assign('/dashboard/login?ended=' + (endedBy[b.reason] || 'expired'));
      }
    });
    es.onerror = () => {
      if (es.readyState !== EventSource.CLOSED) {
        setConn('Reconnecting…');
        return;
      }
      // Refused: an unknown model (try the default), or no session.
      if (!view.gotHello && view.model) {
        view.model = '';
        history.replaceState(null, '', location.pathname);
        connect();
        return;
      }
      location.assign('/dashboard/login?ended=expired');
    };
  }

  function switchModel(uuid) {
    if (uuid === view.model) return;
    view.model = uuid;
    view.first = true;
    view.rows.clear();
    view.activity = [];
    view.timeline = [];
    view.entity = null;
    renderActivity();
    renderTimeline();
    renderEntityHistory();
    renderModels();
    connect();
    byId('main').focus();
  }

  document.addEventListener('DOMContentLoaded', () => {
    byId('models').addEventListener('click', (e) => {
      const a = e.target.closest('a[data-model]');
      if (!a || e.ctrlKey || e.metaKey || e.shiftKey) return;
      e.preventDefault();
      history.pushState(null, '', a.getAttribute('href'));
      switchModel(a.getAttribute('data-model'));
    });
    byId('main').addEventListener('click', (e) => {
      const b = e.target.closest('button[data-history-kind]');
      if (b) openEntityHistory(b.getAttribute('data-history-kind'), b.getAttribute('data-history-id'));
    });
    byId('entity-history-close').addEventListener('click', closeEntityHistory);
    window.addEventListener('popstate', () => switchModel(new URLSearchParams(location.search).get('model') || ''));
    renderActivity();
    renderTimeline();
    renderMetrics();
    connect();
    setInterval(tickSince, 1000);
  });
})();
