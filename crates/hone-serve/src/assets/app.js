// hone dashboard: keeps a run page current without reloading it. The server pushes a
// `change` event (server-sent events) whenever the store moves; the page then fetches what
// changed, rendered and escaped by the server, and swaps it in: the counters, the plot only
// when its drawing changed (the page sends the key of the one it shows), and in the default
// view (newest first, page 1) only the rows in flight and the new ones (the page sends the
// smallest number that may have changed); any other view gets its table whole.
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

  // The smallest row number that may change: the oldest row on the page that is in flight
  // or may still be rewritten (a kept or baseline row: a champion re-test, the final holdout,
  // a resume's clean-up rewrite them), else the next one. At most a page of rows is resent.
  function since() {
    var next = 0, oldest = null;
    document.querySelectorAll('#experiments tbody tr[data-n]').forEach(function (tr) {
      var n = parseInt(tr.dataset.n, 10);
      if (n + 1 > next) next = n + 1;
      var open = tr.classList.contains('r-running') || tr.classList.contains('r-keep') ||
        tr.classList.contains('r-baseline');
      if (open && (oldest === null || n < oldest)) oldest = n;
    });
    return oldest === null ? next : oldest;
  }

  function replaceOuter(selector, html) {
    var el = document.querySelector(selector);
    if (!el) return;
    var t = document.createElement('template');
    t.innerHTML = html;
    if (t.content.firstElementChild) el.replaceWith(t.content.firstElementChild);
  }

  // Puts each sent row in place (newest first), replacing the row of the same number, and
  // keeps the page at most `per` rows long.
  function applyRows(v, before) {
    var body = document.querySelector('#experiments tbody');
    if (!body) return;
    var t = document.createElement('template');
    t.innerHTML = '<table><tbody>' + v.rows + '</tbody></table>';
    var sent = t.content.querySelectorAll('tr[data-n]');
    if (sent.length) body.querySelectorAll('tr:not([data-n])').forEach(function (tr) { tr.remove(); });
    sent.forEach(function (tr) {
      var n = parseInt(tr.dataset.n, 10);
      var old = body.querySelector('tr[data-n="' + n + '"]');
      if (old) { old.replaceWith(tr); return; }
      var after = null;
      body.querySelectorAll('tr[data-n]').forEach(function (r) {
        if (after === null && parseInt(r.dataset.n, 10) < n) after = r;
      });
      body.insertBefore(tr, after);
      if (!before[tr.dataset.n]) tr.classList.add('new');
    });
    var table = document.getElementById('experiments');
    var per = parseInt(table && table.dataset.per, 10) || 50;
    var rows = body.querySelectorAll('tr[data-n]');
    for (var i = per; i < rows.length; i++) rows[i].remove();
    replaceOuter('#table .filters', v.filters);
    replaceOuter('#table .pager', v.pager);
  }

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    var before = rowIds();
    var plot = document.getElementById('plot');
    var held = 'plot=' + encodeURIComponent(run.dataset.plotKey || '') + '&since=' + since();
    // The page's own query (its view, and the token its address carries) goes along.
    var view = run.dataset.view;
    var query = location.search.replace(/^\?/, '');
    view += (view.indexOf('?') < 0 ? '?' : '&') + (query ? query + '&' : '') + held;
    fetch(view, {
      credentials: 'same-origin',
      headers: { 'Accept': 'application/json' }
    }).then(function (r) {
      if (!r.ok) throw new Error('HTTP ' + r.status);
      return r.json();
    }).then(function (v) {
      document.getElementById('counters').innerHTML = v.counters;
      if (v.plot !== undefined) {
        plot.innerHTML = v.plot;
        run.dataset.plotKey = v.plot_key;
      } else {
        // The same drawing: only its title (the count of experiments) moves.
        var title = plot.querySelector('svg > text[font-size="16"]');
        if (title) title.textContent = v.plot_title;
      }
      document.getElementById('state').innerHTML = v.state;
      if (v.table !== undefined) {
        document.getElementById('table').innerHTML = v.table;
        document.querySelectorAll('#experiments tbody tr[data-n]').forEach(function (tr) {
          if (!before[tr.dataset.n]) tr.classList.add('new');
        });
      } else {
        applyRows(v, before);
      }
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
    // A green dot only while a hone is at work on the run; a stopped run's page is just
    // up to date.
    setConn(d.live ? 'live' : 'up to date', d.live ? 'up' : 'idle');
    if (d.mark !== mark) refresh();
  });
  events.onerror = function () { setConn('reconnecting…', 'down'); };
})();
