"""The HTML report's page as text: its template (the fields `render` fills in, in
braces), its style sheet and its script (html.py draws what goes in). Nothing on the
page is fetched: it is one self-contained file."""

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>cmc: {title}</title>
<style>{css}</style></head>
<body>
<header class="{verdict_class}">
<h1 id="message">{message}</h1>
<div class="meta"><span>model <b>{model}</b></span><span>property <b>{prop}</b></span>
<span>{states} states</span><span class="params">{params}</span></div>
<div class="legend">{legend}<span class="muted">click a row, or ↑ ↓ to move</span></div>
</header>
<main>
<div id="chartpane"><div id="heads"><svg width="{width}" height="{head_h}">{head}</svg></div>
{body}</div>
<aside id="panel">{panels}</aside>
</main>
<script>var LAST = {last};
{js}</script>
</body></html>
"""

CSS = """
*{box-sizing:border-box} summary{cursor:pointer} .muted{color:#868e96} .small{font-size:11px}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
 color:#212529;height:100vh;display:flex;flex-direction:column;background:#fff}
code,pre,.msg,.note,.state,.params{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,monospace}
header{padding:10px 18px 8px;border-bottom:1px solid #dee2e6;border-left:6px solid #2b8a3e}
header.violated{border-left-color:#e03131;background:#fff5f5}
h1{font-size:17px;margin:0 0 4px;color:#c92a2a} header.ok h1{color:#2b8a3e}
.meta,.legend{display:flex;flex-wrap:wrap;gap:4px 18px;color:#495057;font-size:13px}
.params{font-size:12px} .legend{font-size:12px;margin-top:6px;align-items:center}
.key{display:inline-flex;align-items:center;gap:4px} main{flex:1;display:flex;min-height:0}
#chartpane{flex:1;overflow:auto;min-width:0} #heads svg,#chart{display:block}
#heads{position:sticky;top:0;background:#fff;border-bottom:1px solid #e9ecef;z-index:1;
 width:max-content;min-width:100%}
.who rect{fill:#343a40;stroke:#343a40} .who text{fill:#fff;font-weight:600;text-anchor:middle}
.who.client rect,.who.other rect{fill:#e7f5ff;stroke:#74c0fc}
.who.service rect{fill:#fff9db;stroke:#fcc419} .who.service text{fill:#e67700}
.who.client text,.who.other text{fill:#1864ab} .who text.role{fill:#868e96;font:11px sans-serif}
.step{cursor:pointer} .step.sel .state{font-weight:700} .state,.msg,.note{font-size:12px}
.kind{font-size:11px;fill:#868e96;letter-spacing:.04em} .clock{font-size:11px;fill:#1971c2} .bad{font:600 11px sans-serif;fill:#e03131}
.life{stroke:#adb5bd;stroke-width:1.5;stroke-dasharray:4 3} .life.dead{stroke:#e9ecef}
.step :is(.bg,.chip){fill:#fff} .step:nth-child(even) :is(.bg,.chip){fill:#f8f9fa}
.step:hover :is(.bg,.chip){fill:#e7f5ff} .step.sel :is(.bg,.chip){fill:#d0ebff}
#panel{width:min(560px,45vw);overflow:auto;border-left:1px solid #dee2e6;padding:6px 16px 24px;
 background:#fcfcfd}
h2{font-size:16px;margin:8px 0 4px} h4{font-size:13px;margin:0 0 4px}
h3{font-size:13px;margin:16px 0 6px;color:#495057;text-transform:uppercase;letter-spacing:.05em}
pre{margin:0 0 6px;padding:6px 8px;background:#f1f3f5;border-radius:4px;white-space:pre-wrap;
 word-break:break-all;font-size:12px}
pre.label{background:#212529;color:#f8f9fa;font-size:13px} pre.body{font-size:12px;margin:2px 0} pre.stderr{background:#fff4e6}
pre.calls{background:#fff;border:1px solid #e9ecef;max-height:320px;overflow:auto}
table.nodes{border-collapse:collapse;width:100%;font-size:12px} .nodes th{background:#f1f3f5}
.nodes :is(th,td){border:1px solid #e9ecef;padding:3px 6px;text-align:left;vertical-align:top}
.nodes td code{word-break:break-all} td.changed{background:#fff3bf}
ul.plain{list-style:none;margin:0;padding:0} .plain li{border-bottom:1px dotted #e9ecef}
.out{margin:0 0 10px;padding:6px 8px;border:1px solid #e9ecef;border-radius:4px;background:#fff}
.new{background:#2b8a3e;color:#fff;border-radius:3px;padding:0 4px;font-size:11px}
.who.ops text{fill:#495057;text-anchor:start} .timeline .chip{fill:#fff;opacity:.9}
.timeline .op:hover line{stroke-width:9} tr.bad td{background:#fff5f5;color:#c92a2a}
"""

JS = """
(function () {
  var current = -1, rows = document.querySelectorAll('.step');
  function show(i, on) {
    rows[i].classList.toggle('sel', on);
    document.getElementById('panel-' + i).hidden = !on;
  }
  function select(i, scroll) {
    if (!rows.length) return;
    i = Math.max(0, Math.min(rows.length - 1, i));
    if (current >= 0) show(current, false);
    show(current = i, true);
    document.getElementById('panel').scrollTop = 0;
    if (location.hash !== '#step=' + i) history.replaceState(null, '', '#step=' + i);
    if (scroll) rows[i].scrollIntoView({block: 'nearest'});
  }
  function fromHash() {
    var m = /^#step=(\\d+)$/.exec(location.hash);
    return m ? parseInt(m[1], 10) : LAST;
  }
  document.getElementById('chart').addEventListener('click', function (e) {
    var row = e.target.closest('[data-step]');
    if (row) select(parseInt(row.getAttribute('data-step'), 10), false);
  });
  document.addEventListener('keydown', function (e) {
    var to = {ArrowDown: current + 1, ArrowUp: current - 1, j: current + 1, k: current - 1,
              Home: 0, End: rows.length - 1};
    if (!to.hasOwnProperty(e.key) || e.altKey || e.ctrlKey || e.metaKey) return;
    select(to[e.key], true);
    e.preventDefault();
  });
  window.addEventListener('hashchange', function () { select(fromHash(), true); });
  select(fromHash(), true);
})();
"""
