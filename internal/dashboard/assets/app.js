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
  const okStatuses = new Set(['started', 'running', 'active', 'attached', 'idle', 'alive']);

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

  function msgCell(...sts) {
    const msgs = sts.filter((s) => s && s.message).map((s) => s.message);
    return el('td', {class: 'msg', text: msgs.join('; ') || '-'});
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
          msgCell(m['agent-status'], m['instance-status'], m['modification-status']),
        ],
      });
      for (const c of m.containers || []) walk(c, depth + 1);
    };
    for (const m of st.machines || []) walk(m, 0);
    table('machines', 'Machines, with containers under their host', ['Machine', 'Life', 'Agent', 'Instance ID', 'Instance', 'Base', 'Addresses', 'Message'], rows,
      st.type === 'caas' ? 'A Kubernetes model has no machines.' : 'No machines.');
  }

  function renderApplications(st) {
    const apps = st.applications || [];
    table('applications', 'Applications', ['Application', 'Life', 'Charm', 'Scale', 'Units', 'Address', 'Status', 'Message'],
      apps.map((a) => ({
        key: 'application/' + a.name, level: alertLevel('application', a.name),
        sig: {l: a.life, s: a.scale, u: (a.units || []).length, o: a['operator-status'], ad: a.addresses},
        cells: [a.name, el('td', {}, badge(a.life)), a.charm, st.type === 'caas' ? String(a.scale) : '-',
          String((a.units || []).length), (a.addresses || []).join(', '), statusCell(a['operator-status']), msgCell(a['operator-status'])],
      })), 'No applications.');
    const rows = [];
    for (const a of apps) {
      for (const u of a.units || []) {
        rows.push({
          key: 'unit/' + u.name, level: alertLevel('unit', u.name), sig: u,
          cells: [u.name, el('td', {}, badge(u.life)), u.machine || '-', el('td', {class: 'mono', text: u['provider-id'] || '-'}),
            u.address || '-', statusCell(u['workload-status']), statusCell(u['container-status'] && u['container-status'].status ? u['container-status'] : u['agent-status']),
            msgCell(u['workload-status'], u['container-status'], u['agent-status'])],
        });
      }
    }
    table('units', 'Units', ['Unit', 'Life', 'Machine', 'Provider ID', 'Address', 'Workload', 'Container / agent', 'Message'], rows, 'No units.');
  }

  function renderStorage(st, pools) {
    const s = st.storage || {};
    const fsBy = new Map((s.filesystems || []).map((f) => [f['storage-id'], f]));
    const volBy = new Map((s.volumes || []).filter((v) => v['storage-id']).map((v) => [v['storage-id'], v]));
    const volByID = new Map((s.volumes || []).map((v) => [v.id, v]));
    // A storage instance attached to no unit is "detached"; a filesystem
    // or volume that belongs to no storage instance and is attached to
    // nothing is "orphaned" (the daemon marks it): both stay until
    // remove-storage or remove-model takes them out.
    const owner = (who, flag) => who ? who : el('span', {}, badge(flag));
    const rows = (s.instances || []).map((i) => {
      const f = fsBy.get(i.id), v = volBy.get(i.id);
      const x = f || v || {};
      const where = f && f.attachment ? f.attachment['mount-point'] : v && v.attached && v.attached[0] ? v.attached[0]['device-name'] : '';
      return {
        key: 'storage/' + i.id, level: alertLevel('storage', i.id) || (f && alertLevel('filesystem', f.id)) || (v && alertLevel('volume', v.id)), sig: [i, f, v],
        cells: [i.id, i.kind, el('td', {}, owner(i.unit, 'detached')), el('td', {}, badge(i.life)), x.pool || '-', x.size ? x.size + ' MiB' : '-',
          el('td', {class: 'mono', text: x['provider-id'] || '-'}), statusCell(x.status), where || '-'],
      };
    });
    for (const f of (s.filesystems || []).filter((f) => f.orphaned)) {
      const v = volByID.get(f.volume);
      rows.push({
        key: 'filesystem/' + f.id, level: alertLevel('filesystem', f.id), sig: [f, v],
        cells: ['filesystem ' + f.id, 'filesystem', el('td', {}, owner('', 'orphaned')), el('td', {}, badge(f.life)), f.pool || '-',
          f.size ? f.size + ' MiB' : '-', el('td', {class: 'mono', text: [f['provider-id'], v && v['provider-id']].filter(Boolean).join(', ') || '-'}),
          statusCell(f.status), '-'],
      });
    }
    const volMachine = new Map();
    const walk = (m) => { for (const v of m.volumes || []) volMachine.set(v.id, m.id); for (const c of m.containers || []) walk(c); };
    for (const m of st.machines || []) walk(m);
    for (const v of (s.volumes || []).filter((v) => !v['storage-id'] || v.orphaned)) {
      const m = (v.attached || []).map((a) => a.machine).filter(Boolean).join(', ') || volMachine.get(v.id) || '';
      rows.push({
        key: 'volume/' + v.id, level: alertLevel('volume', v.id), sig: v,
        cells: ['volume ' + v.id, 'block', el('td', {}, m ? 'machine ' + m : owner('', v.orphaned ? 'orphaned' : 'detached')), el('td', {}, badge(v.life)),
          v.pool || '-', v.size ? v.size + ' MiB' : '-',
          el('td', {class: 'mono', text: v['provider-id'] || '-'}), statusCell(v.status), (v.attached || []).map((a) => a['device-name']).filter(Boolean).join(', ') || '-'],
      });
    }
    table('storage', 'Storage instances and machine volumes', ['Storage', 'Kind', 'Owner', 'Life', 'Pool', 'Size', 'Provider ID', 'Status', 'Location'], rows, 'No storage.');
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
        ' is ' + a.status, a.since ? ' ' : '', since(a.since), a.message ? ': ' + a.message : ''));
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
    renderStorage(st, snap.pools);
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
      const t = new Date(c.time);
      ol.append(el('li', {}, el('time', {datetime: c.time, text: t.toLocaleTimeString()}),
        el('span', {class: 'what', text: c.kind + ' ' + c.id}), ' ' + describeChange(c)));
    }
  }

  // ---- chart

  const charts = [
    {key: 'requestsPerS', title: 'Requests/s', cls: 'm1', fmt: (v) => v.toFixed(v < 10 ? 1 : 0)},
    {key: 'loginsPerS', title: 'Logins/s', cls: 'm2', fmt: (v) => v.toFixed(v < 10 ? 1 : 0)},
    {key: 'agents', title: 'Agents connected', cls: 'm3', fmt: (v) => String(Math.round(v))},
    {key: 'commitMs', title: 'Commit latency (ms)', cls: 'm4', fmt: (v) => v.toFixed(v < 10 ? 2 : 1)},
  ];

  function renderMetrics() {
    const box = byId('metrics');
    box.replaceChildren();
    const w = 120, h = 36;
    const end = view.samples.length ? view.samples[view.samples.length - 1].t : Date.now();
    for (const c of charts) {
      const pts = view.samples.filter((s) => s[c.key] !== null && s[c.key] !== undefined);
      const top = Math.max(1e-9, ...pts.map((s) => s[c.key]));
      const last = pts.length ? pts[pts.length - 1][c.key] : null;
      const svg = document.createElementNS(SVG, 'svg');
      svg.setAttribute('viewBox', '0 0 ' + w + ' ' + h);
      svg.setAttribute('preserveAspectRatio', 'none');
      svg.setAttribute('role', 'img');
      svg.setAttribute('aria-label', c.title + ' over the last two minutes, at most ' + (pts.length ? c.fmt(top) : 'none'));
      const line = document.createElementNS(SVG, 'polyline');
      line.setAttribute('points', pts.map((s) => {
        const x = w - (end - s.t) / 1000;
        const y = h - 2 - (s[c.key] / top) * (h - 4);
        return x.toFixed(1) + ',' + y.toFixed(1);
      }).join(' '));
      svg.append(line);
      box.append(el('div', {class: 'metric ' + c.cls}, el('h3', {text: c.title}),
        el('div', {class: 'value', text: last === null ? (c.key === 'commitMs' ? 'no commits' : '-') : c.fmt(last)}), svg));
    }
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
    renderActivity();
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
    window.addEventListener('popstate', () => switchModel(new URLSearchParams(location.search).get('model') || ''));
    renderActivity();
    renderMetrics();
    connect();
    setInterval(tickSince, 1000);
  });
})();
