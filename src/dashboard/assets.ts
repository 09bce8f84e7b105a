/*
 * The dashboard's own CSS and script, served from /static so the pages can run under a
 * Content-Security-Policy without inline code. The one library they use, uPlot (the activity
 * charts), is served from /static too, from node_modules (ops-routes.ts).
 */

/** Where the pages load uPlot from (the activity charts): the dashboard serves it, no CDN. */
export const UPLOT_JS_PATH = '/static/uplot.min.js';
export const UPLOT_CSS_PATH = '/static/uplot.min.css';

export const DASHBOARD_CSS = `
:root { --fg:#1d2330; --muted:#5b6475; --line:#dde1e8; --bg:#f5f6f8; --card:#fff; --accent:#2457c5;
  --ok:#1f7a3f; --ok-bg:#e3f4e8; --warn:#8a5a00; --warn-bg:#fdf1d8; --bad:#a8242c; --bad-bg:#fbe4e5;
  --run:#1d4fb8; --run-bg:#e3ebfb; --block:#8d2f00; --block-bg:#ffe6d5; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; color:var(--fg); background:var(--bg); }
header.top { display:flex; align-items:center; gap:24px; padding:10px 24px; background:#1d2330; color:#fff; }
header.top .brand { font-weight:700; font-size:16px; letter-spacing:.2px; }
header.top nav { display:flex; gap:16px; flex:1; }
header.top a { color:#cfd7e6; text-decoration:none; }
header.top a.active, header.top a:hover { color:#fff; text-decoration:underline; }
header.top form { margin:0; }
header.top button { background:transparent; color:#cfd7e6; border:1px solid #4a5366; }
main { padding:20px 24px 40px; max-width:1400px; margin:0 auto; }
h1 { font-size:22px; margin:0 0 4px; }
h2 { font-size:17px; margin:24px 0 8px; }
.sub { color:var(--muted); margin:0 0 16px; }
.card { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:14px 16px; margin:12px 0; }
table { border-collapse:collapse; width:100%; background:var(--card); }
th, td { text-align:left; padding:7px 10px; border-bottom:1px solid var(--line); vertical-align:top; }
th { font-size:12px; text-transform:uppercase; letter-spacing:.4px; color:var(--muted); background:#fafbfc; white-space:nowrap; }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; }
tr:hover td { background:#fafcff; }
.scroll { overflow-x:auto; border:1px solid var(--line); border-radius:8px; }
.scroll table { border:0; }
a { color:var(--accent); }
.badge { display:inline-block; padding:2px 8px; border-radius:10px; font-size:12.5px; font-weight:600; white-space:nowrap; }
.badge.ok { color:var(--ok); background:var(--ok-bg); }
.badge.warn { color:var(--warn); background:var(--warn-bg); }
.badge.bad { color:var(--bad); background:var(--bad-bg); }
.badge.running { color:var(--run); background:var(--run-bg); }
.badge.blocked { color:var(--block); background:var(--block-bg); }
.bar { width:120px; height:8px; background:#e6e9ef; border-radius:4px; overflow:hidden; margin-top:4px; }
.bar > span { display:block; height:100%; background:var(--run); }
.counts { display:flex; flex-wrap:wrap; gap:10px; margin:12px 0; }
.counts div { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:8px 14px; min-width:110px; }
.counts b { display:block; font-size:20px; font-variant-numeric:tabular-nums; }
.counts span { color:var(--muted); font-size:12px; text-transform:uppercase; letter-spacing:.4px; }
.counts .bad b { color:var(--bad); } .counts .ok b { color:var(--ok); }
form.filters { display:flex; flex-wrap:wrap; gap:10px; align-items:flex-end; margin:10px 0; }
form.filters label { display:flex; flex-direction:column; font-size:12px; color:var(--muted); gap:3px; }
input, select, button { font:inherit; padding:6px 10px; border:1px solid #c4cad5; border-radius:6px; background:#fff; color:var(--fg); }
button { cursor:pointer; background:#eef1f6; }
button.primary { background:var(--accent); border-color:var(--accent); color:#fff; }
button.danger { background:var(--bad); border-color:var(--bad); color:#fff; }
a.button { display:inline-block; padding:6px 12px; border:1px solid #c4cad5; border-radius:6px; background:#eef1f6; color:var(--fg); text-decoration:none; }
a.button.primary { background:var(--accent); border-color:var(--accent); color:#fff; }
a:focus-visible, button:focus-visible, select:focus-visible, input:focus-visible { outline:3px solid #f0a500; outline-offset:2px; }
/* The browser import's steps and forms (issue 45). */
ol.steps { display:flex; flex-wrap:wrap; gap:6px 18px; list-style:none; padding:0; margin:6px 0 12px; font-size:13px; color:var(--muted); }
ol.steps li.current { color:var(--fg); font-weight:600; }
form.import-form { display:flex; flex-direction:column; gap:12px; max-width:560px; }
form.import-form label { display:flex; flex-direction:column; gap:4px; font-size:13px; color:var(--muted); }
table.mapping td.samples { max-width:260px; overflow-wrap:anywhere; font-size:12.5px; }
table.mapping td.holds:not(.none) .dash { display:none; }
table.mapping th.col-name { text-transform:none; letter-spacing:0; font-size:14px; color:var(--fg); background:none; white-space:normal; overflow-wrap:anywhere; }
.progress progress { width:min(360px, 60vw); }
.actions { display:flex; flex-wrap:wrap; gap:10px; align-items:center; }
.actions form { margin:0; display:inline-flex; flex-wrap:wrap; gap:8px; align-items:center; }
.notice { border-radius:8px; padding:10px 14px; margin:12px 0; border:1px solid; }
.notice.ok { background:var(--ok-bg); border-color:#b6dfc3; color:#164f2b; }
.notice.warn { background:var(--warn-bg); border-color:#efd49a; color:#5c3d00; }
.notice.bad { background:var(--bad-bg); border-color:#f0b8bb; color:#7a1a20; }
.pager { display:flex; gap:12px; align-items:center; margin:10px 0; color:var(--muted); }
.muted { color:var(--muted); }
.small { font-size:11.5px; }
.nowrap { white-space:nowrap; }
td.run { min-width:200px; } td.run .mono { white-space:nowrap; }
/* The runs list's results: one line per kind the run has, coloured like the run page's tiles. */
td.results { white-space:nowrap; font-size:13px; font-variant-numeric:tabular-nums; }
td.results .bad b { color:var(--bad); } td.results .ok b { color:var(--ok); } td.results .warn b { color:var(--warn); }
td.started { white-space:nowrap; }
.counts .warn b { color:var(--warn); }
td.status { min-width:130px; max-width:260px; }
.detail { color:var(--muted); margin-top:2px; overflow-wrap:anywhere; }
.progress { display:flex; align-items:center; gap:6px; }
.progress .bar { margin-top:0; }
.live { font-variant-numeric:tabular-nums; }
form.upload { margin-top:12px; }
.chart h2 { margin-top:0; }
.sparks { display:grid; grid-template-columns:repeat(auto-fit, minmax(240px, 1fr)); gap:12px; }
figure.spark { margin:0; min-width:0; }
figure.spark figcaption { font-size:12.5px; margin-bottom:2px; }
figure.spark .plot { min-height:90px; overflow:hidden; background:#fafbfc; border:1px solid var(--line); border-radius:4px; }
figure.spark .plot .uplot { width:auto; }
figure.spark .u-legend { font-size:11.5px; text-align:left; margin:0 0 0 36px; }
/* The readout says a moment's values: shown while the pointer is on the chart, not as "UTC: --". */
figure.spark .u-legend { visibility:hidden; }
figure.spark:hover .u-legend { visibility:visible; }
/* uPlot's hover readout is a table: not the dashboard's table look (capitals, borders, hover). */
figure.spark .u-legend th, figure.spark .u-legend td { text-transform:none; letter-spacing:0; background:none;
  border:0; padding:0 4px 0 0; font-size:11.5px; font-weight:400; color:var(--muted); white-space:nowrap; }
figure.spark .u-legend tr:hover td { background:none; }
/* The line's colour: dashboard.js gives it to uPlot, which draws on a canvas. */
figure.spark.run .plot { color:var(--run); }
figure.spark.ok .plot { color:var(--ok); }
figure.spark.warn .plot { color:#c88a00; }
figure.spark.bad .plot { color:var(--bad); }
table.groups td.err { max-width:640px; }
/* What to do instead of a retry is a sentence: it wraps, where the group's links and button do not. */
table.groups [data-permanent] { display:inline-block; white-space:normal; max-width:320px; }
/* A plan's ids and sources are long words: they wrap rather than widen a phone's page. */
h1.plan-title, h1.record-title, .sub .mono, p.history, p.plan-link, td.approver { overflow-wrap:anywhere; }
td.approver { max-width:180px; }
@media (max-width: 720px) {
  header.top { flex-wrap:wrap; gap:8px 16px; padding:10px 12px; }
  header.top nav { flex-basis:100%; order:3; }
  main { padding:14px 10px 30px; }
  h1 { font-size:19px; }
  .counts div { min-width:90px; padding:6px 10px; }
  form.filters label, form.filters input, form.filters select { width:100%; }
  th, td { padding:6px 7px; }
  td.run { min-width:170px; }
  /* The runs list keeps what an operator scans for on a phone: run, status, counts, duration. */
  th.wide, td.wide { display:none; }
  /* A table of cards: each line a block, its cells one under another, so its actions stay on screen. */
  table.cards thead { display:none; }
  table.cards, table.cards tbody, table.cards tr, table.cards td { display:block; }
  table.cards tr { border-bottom:1px solid var(--line); padding:6px 0; }
  table.cards td { border:0; padding:2px 10px; max-width:none; }
  table.cards td.num, table.cards td.result { display:inline-block; text-align:left; }
  table.cards td.nowrap { white-space:normal; }
  /* The mapping table as cards: each choice says what it is, the header being hidden. */
  table.mapping td[data-label]::before { content:attr(data-label); display:block; font-size:11.5px; color:var(--muted); }
  table.mapping td.holds.none { display:none; }
}
.err { color:var(--bad); max-width:420px; }
code, .mono { font-family:ui-monospace,SFMono-Regular,Menlo,monospace; font-size:12.5px; }
.login { max-width:380px; margin:80px auto; }
.login input { width:100%; margin:6px 0 12px; }
`;

/*
 * Reload while a run is in progress, unless the operator is in the middle of something
 * (a ticked row, a chosen file, typing): a reload would throw that away.
 */
export const DASHBOARD_JS = `
(function () {
  var seconds = Number(document.body.getAttribute('data-refresh') || 0);
  if (!seconds) return;
  function busy() {
    if (document.querySelector('input[type=checkbox]:checked')) return true;
    var files = document.querySelectorAll('input[type=file]');
    for (var i = 0; i < files.length; i++) if (files[i].files && files[i].files.length) return true;
    var a = document.activeElement;
    return !!a && (a.tagName === 'INPUT' || a.tagName === 'SELECT' || a.tagName === 'TEXTAREA');
  }
  setInterval(function () { if (!busy()) location.reload(); }, seconds * 1000);
})();
/*
 * Activity charts: each chart (data-chart) carries its series as a JSON data block; every line
 * of it (figure[data-series]) is drawn with uPlot (/static/uplot.min.js) in the figure's .plot
 * box. Once drawn, the figure says what uPlot holds (data-drawn: buckets, data-drawn-max,
 * data-drawn-total, data-drawn-nonzero, data-drawn-axis: the time axis's labels), for tests and
 * anyone inspecting the page.
 */
(function () {
  if (typeof uPlot === 'undefined') return;
  var root = getComputedStyle(document.documentElement);
  var muted = root.getPropertyValue('--muted').trim() || '#5b6475';
  var grid = root.getPropertyValue('--line').trim() || '#dde1e8';
  var HEIGHT = 90;
  var plots = [];
  function num(v) {
    return v == null ? '' : v.toLocaleString('en-US', { maximumFractionDigits: 1 });
  }
  // 24-hour UTC times, as the chart's heading says them (uPlot's default axis is 12-hour, local).
  function hhmm(ts) { return new Date(ts * 1000).toISOString().slice(11, 16); }
  function hhmmss(ts) { return ts == null ? '' : new Date(ts * 1000).toISOString().slice(11, 19); }
  function draw(figure, data) {
    var label = figure.getAttribute('data-series');
    var values = data.lines[label];
    var box = figure.querySelector('.plot');
    if (!values || !box || !data.t.length) return;
    var half = data.bucketSeconds / 2;
    var axis = { stroke: muted, font: '10px system-ui, sans-serif', grid: { stroke: grid, width: 1 },
      ticks: { stroke: grid, width: 1, size: 3 } };
    var u = new uPlot({
      width: Math.max(120, box.clientWidth),
      height: HEIGHT,
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'); },
      cursor: { y: false, drag: { x: false, y: false } },
      legend: { show: true },
      scales: {
        // One bucket (a run of a few seconds) is drawn as a point in the middle of its 10 s.
        x: { time: true, range: function (u, min, max) { return min === max ? [min - half, max + half] : [min, max]; } },
        y: { range: function (u, min, max) { return [0, max > 0 ? max * 1.05 : 1]; } }
      },
      axes: [
        Object.assign({ size: 22, space: 60, values: function (u, splits, i, space, incr) {
          var out = splits.map(incr < 60 ? hhmmss : hhmm);
          figure.setAttribute('data-drawn-axis', out.join(' '));
          return out;
        } }, axis),
        Object.assign({ size: 36, space: 24 }, axis)
      ],
      series: [
        { label: 'UTC', value: function (u, v) { return hhmmss(v); } },
        { label: label, stroke: getComputedStyle(box).color, width: 1.6, value: function (u, v) { return num(v); } }
      ]
    }, [data.t, values], box);
    var drawn = u.data[1];
    var max = 0, total = 0, nonzero = 0;
    for (var i = 0; i < drawn.length; i++) {
      var v = drawn[i] || 0;
      if (v > max) max = v;
      total += v;
      if (v > 0) nonzero++;
    }
    figure.setAttribute('data-drawn', String(u.data[0].length));
    figure.setAttribute('data-drawn-max', String(max));
    figure.setAttribute('data-drawn-total', String(total));
    figure.setAttribute('data-drawn-nonzero', String(nonzero));
    plots.push({ u: u, box: box });
  }
  var charts = document.querySelectorAll('[data-chart]');
  for (var c = 0; c < charts.length; c++) {
    var block = charts[c].querySelector('script[data-chart-data]');
    if (!block) continue;
    var data;
    try { data = JSON.parse(block.textContent); } catch (e) { continue; }
    var figures = charts[c].querySelectorAll('figure[data-series]');
    for (var f = 0; f < figures.length; f++) draw(figures[f], data);
  }
  var pending = 0;
  window.addEventListener('resize', function () {
    clearTimeout(pending);
    pending = setTimeout(function () {
      for (var i = 0; i < plots.length; i++) {
        var w = plots[i].box.clientWidth;
        plots[i].u.setSize({ width: Math.max(120, w), height: HEIGHT });
      }
    }, 100);
  });
})();
document.addEventListener('change', function (e) {
  var t = e.target;
  if (t && t.id === 'select-all') {
    var boxes = document.querySelectorAll('input[name=row]');
    for (var i = 0; i < boxes.length; i++) boxes[i].checked = t.checked;
  }
  // The mapping table: "holds ids | names" is offered while the column's field is a reference.
  var table = t && t.closest ? t.closest('table[data-reference-fields]') : null;
  if (table && t.name.indexOf('field_') === 0) {
    var cell = t.closest('tr').querySelector('td.holds');
    var holds = cell && cell.querySelector('select');
    if (holds) {
      var reference = table.getAttribute('data-reference-fields').split(' ').indexOf(t.value) >= 0;
      holds.hidden = !reference;
      cell.classList.toggle('none', !reference);
    }
  }
});
`;
