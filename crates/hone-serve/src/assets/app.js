// hone dashboard: keeps a run page current without reloading it. The server pushes a
// `change` event (server-sent events) whenever the store moves; the page then fetches its
// counters, plot and table, rendered and escaped by the server, and swaps them in.
(function () {
  'use strict';
  var run = document.getElementById('run');
  if (!run || !window.EventSource || !window.fetch) return;
  var mark = run.dataset.mark;
  var busy = false;
  var again = false;
  var conn = document.getElementById('conn');

  function setConn(text, cls) {
    if (!conn) return;
    conn.textContent = text;
    conn.className = 'conn ' + cls;
  }

  function rowIds() {
    var ids = {};
    document.querySelectorAll('#experiments tbody tr[data-n]').forEach(function (tr) {
      ids[tr.dataset.n] = true;
    });
    return ids;
  }

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    var before = rowIds();
    fetch(run.dataset.view + location.search, {
      credentials: 'same-origin',
      headers: { 'Accept': 'application/json' }
    }).then(function (r) {
      if (!r.ok) throw new Error('HTTP ' + r.status);
      return r.json();
    }).then(function (v) {
      document.getElementById('counters').innerHTML = v.counters;
      document.getElementById('plot').innerHTML = v.plot;
      document.getElementById('table').innerHTML = v.table;
      document.getElementById('state').innerHTML = v.state;
      document.querySelectorAll('#experiments tbody tr[data-n]').forEach(function (tr) {
        if (!before[tr.dataset.n]) tr.classList.add('new');
      });
      mark = v.mark;
      run.dataset.mark = mark;
    }).catch(function () {
      setConn('update failed; retrying', 'down');
    }).then(function () {
      busy = false;
      if (again) { again = false; refresh(); }
    });
  }

  var events = new EventSource(run.dataset.events);
  events.addEventListener('change', function (ev) {
    var d;
    try { d = JSON.parse(ev.data); } catch (e) { return; }
    setConn(d.live ? 'live' : 'watching', 'up');
    if (d.mark !== mark) refresh();
  });
  events.onerror = function () { setConn('reconnecting…', 'down'); };
})();
