"""The interactive alignment explorer: one self-contained HTML page (no network, works
from file://). Click or hover a target word to light up the source words it attends
to (intensity α_ij, weights shown); click a source word to see which target words
attend to it; a heat map beside; previous/next sentence; keyboard operable.

The page's data is a list of attention records in the SPEC form
``{"source": [...], "target": [...], "weights": [[...] per target word]}``. A record that also
carries a beam trace (``steps`` and ``best_path``, engine/decode/beamtrace.py) gets the search
drawn as a tree below: a column per step, a node per hypothesis in the beam (its newest word and
score), edges to parents, ended hypotheses boxed in double lines, the best translation's path in
bold; click a node to light up the source words by its attention row and list what it proposed.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from rnnsearch.io import atomic_write_text

LABELS = {
    "en": {"title": "rnnsearch — attention explorer", "source": "source", "target": "translation",
           "sentence": "sentence", "prev": "◀ previous", "next": "next ▶",
           "hint": "Click or hover a translated word to see where its attention falls; click a source word "
                   "to see which translated words attend to it. Keys: ← → sentences, Tab/Enter words.",
           "weights": "attention weights", "heatmap": "heat map (rows: translation, columns: source)",
           "attends": "attends to", "attended": "is attended by",
           "placeholder": "Type or paste sentences, one a line", "translate": "translate", "beam": "beam",
           "working": "translating…", "loading": "loading the model…",
           "empty": "Translate something to see its attention.",
           "tree": "beam search, step by step", "proposed": "proposed", "ended": "ended",
           "treehint": "A column per step: the beam, best first (each hypothesis's newest word and score), "
                       "lines to the hypotheses they grew from; bold: the best translation's path; double "
                       "box: ended. Click a hypothesis to see its attention and the words it proposed."},
    "zh": {"title": "rnnsearch — 注意力浏览器", "source": "原文", "target": "译文", "sentence": "句子",
           "prev": "◀ 上一句", "next": "下一句 ▶",
           "hint": "点击或悬停译文中的词，查看它的注意力落在原文哪些词上；点击原文词，查看哪些译文词在看它。"
                   "键盘：← → 切换句子，Tab/回车 选择词。",
           "weights": "注意力权重", "heatmap": "热力图（行：译文，列：原文）",
           "attends": "注意", "attended": "被注意",
           "placeholder": "输入或粘贴句子，每行一句", "translate": "翻译", "beam": "束宽",
           "working": "翻译中…", "loading": "正在加载模型…", "empty": "翻译一句话，看它的注意力。",
           "tree": "逐步的束搜索", "proposed": "提出", "ended": "已结束",
           "treehint": "每一列是一步：束中的假设，好的在上（最新的词和得分），连线指向它由之而来的假设；"
                       "粗线：最佳译文的路径；双框：已结束。点击一个假设，查看它的注意力和它提出的词。"},
}

_PAGE = """<!DOCTYPE html>
<html lang="__LANG__">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>__TITLE__</title>
<style>
__FONTFACE__
/* rnnsearch-cjk holds only the page's own CJK characters, so Latin text falls through to the rest */
body { font-family: "rnnsearch-cjk", system-ui, -apple-system, "Segoe UI", "Noto Sans", "Noto Sans CJK SC",
       "PingFang SC", "Microsoft YaHei", sans-serif; margin: 1.5rem; color: #222; max-width: 70rem; }
h1 { font-size: 1.2rem; }
.hint { color: #555; font-size: 0.9rem; }
nav { margin: 1rem 0; display: flex; gap: 1rem; align-items: center; }
.row { display: flex; flex-wrap: wrap; gap: 0.35rem; margin: 0.4rem 0 1rem; }
.label { font-size: 0.8rem; color: #666; text-transform: uppercase; letter-spacing: 0.05em; }
button { font-family: inherit; }
.tok { border: 1px solid #bbb; border-radius: 4px; padding: 0.25rem 0.45rem; cursor: pointer;
       background: #fff; font-size: 1.1rem; position: relative; }
.tok:focus { outline: 2px solid #1a73e8; }
.tok.selected { border-color: #1a73e8; box-shadow: 0 0 0 2px #1a73e8 inset; }
.tok .w { display: block; font-size: 0.7rem; color: #444; text-align: center; min-height: 0.9em; }
#panel { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 2rem; }
table.heat { border-collapse: collapse; font-size: 0.85rem; }
table.heat td, table.heat th { width: 1.6rem; height: 1.6rem; text-align: center; padding: 0; }
table.heat th.col { writing-mode: vertical-rl; height: auto; padding: 0.2rem 0; font-weight: normal; }
table.heat th.rowh { text-align: right; padding-right: 0.4rem; font-weight: normal; width: auto; }
table.heat td.sel { outline: 2px solid #1a73e8; }
#detail { font-size: 0.9rem; color: #333; min-height: 1.5em; }
#live { display: flex; flex-wrap: wrap; gap: 0.6rem; align-items: flex-end; margin: 1rem 0; }
#live textarea { flex: 1 1 30rem; font: inherit; font-size: 1rem; padding: 0.4rem; }
#live input { width: 3.5rem; font: inherit; }
#status { color: #a00; font-size: 0.9rem; }
#tree { margin-top: 1.5rem; }
#treebox { overflow-x: auto; }
#tree .node { cursor: pointer; }
#tree .node rect { fill: #fff; stroke: #999; }
#tree .node rect.inner { fill: none; }
#tree .node.carried { opacity: 0.45; }
#tree .node.best rect { stroke: #1a73e8; }
#tree .node.selected rect { fill: #e8f0fe; }
#tree .node:focus { outline: none; }
#tree .node:focus rect { stroke: #1a73e8; stroke-width: 3; }
#tree text { font-size: 13px; fill: #222; }
#tree text.score { font-size: 10px; fill: #555; }
#tree .edge { stroke: #bbb; stroke-width: 1.2; }
#tree .edge.best { stroke: #1a73e8; stroke-width: 3; }
</style>
</head>
<body>
<h1>__TITLE__</h1>
<p class="hint">__HINT__</p>
__LIVE__
<nav>
  <button id="prev" type="button">__PREV__</button>
  <span id="counter" aria-live="polite"></span>
  <button id="next" type="button">__NEXT__</button>
</nav>
<div id="panel">
  <div>
    <div class="label">__SOURCE__</div>
    <div class="row" id="source" role="group" aria-label="__SOURCE__"></div>
    <div class="label">__TARGET__</div>
    <div class="row" id="target" role="group" aria-label="__TARGET__"></div>
    <div id="detail" aria-live="polite"></div>
  </div>
  <div>
    <div class="label">__HEATMAP__</div>
    <table class="heat" id="heat"></table>
  </div>
</div>
<div id="tree" hidden>
  <div class="label">__TREE__</div>
  <p class="hint">__TREEHINT__</p>
  <div id="treebox"><svg id="treesvg" role="group" aria-label="__TREE__"></svg></div>
</div>
<script id="data" type="application/json">__DATA__</script>
<script>
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("data").textContent);
  var L = __LABELS__;
  var cur = 0, sel = null;  // sel: {side: "target"|"source", index: n}
  var $ = function (id) { return document.getElementById(id); };
  function shade(w) { var v = Math.round(255 * (1 - w)); return "rgb(" + v + "," + v + "," + v + ")"; }
  function textOn(w) { return w > 0.5 ? "#fff" : "#111"; }
  function fmt(w) { return w.toFixed(2); }
  function token(text, side, i) {
    var b = document.createElement("button");
    b.type = "button"; b.className = "tok"; b.dataset.side = side; b.dataset.index = i;
    var t = document.createElement("span"); t.className = "t"; t.textContent = text;
    var w = document.createElement("span"); w.className = "w";
    b.appendChild(t); b.appendChild(w);
    b.addEventListener("click", function () { select(side, i); });
    b.addEventListener("mouseenter", function () { if (side === "target") { show(side, i); } });
    b.addEventListener("mouseleave", function () { if (sel) { restore(); } else { clear(); } });
    b.addEventListener("focus", function () { show(side, i); });
    return b;
  }
  function render() {
    if (!DATA.length) {  // live page before the first translation
      $("counter").textContent = L.empty; $("prev").disabled = true; $("next").disabled = true;
      $("source").innerHTML = ""; $("target").innerHTML = ""; $("heat").innerHTML = ""; $("detail").textContent = "";
      return;
    }
    var d = DATA[cur];
    $("counter").textContent = L.sentence + " " + (cur + 1) + " / " + DATA.length;
    $("prev").disabled = cur === 0; $("next").disabled = cur === DATA.length - 1;
    var src = $("source"), tgt = $("target");
    src.innerHTML = ""; tgt.innerHTML = "";
    d.source.forEach(function (s, i) { src.appendChild(token(s, "source", i)); });
    d.target.forEach(function (s, i) { tgt.appendChild(token(s, "target", i)); });
    var heat = $("heat"); heat.innerHTML = "";
    var head = document.createElement("tr"); head.appendChild(document.createElement("th"));
    d.source.forEach(function (s) { var th = document.createElement("th"); th.className = "col"; th.textContent = s; head.appendChild(th); });
    heat.appendChild(head);
    d.weights.forEach(function (row, i) {
      var tr = document.createElement("tr");
      var th = document.createElement("th"); th.className = "rowh"; th.textContent = d.target[i]; tr.appendChild(th);
      row.forEach(function (w, j) {
        var td = document.createElement("td"); td.style.background = shade(w);
        td.title = d.target[i] + " → " + d.source[j] + ": " + fmt(w);
        td.dataset.row = i; td.dataset.col = j;
        td.addEventListener("click", function () { select("target", i); });
        tr.appendChild(td);
      });
      heat.appendChild(tr);
    });
    drawTree(d);
    sel = null; clear();
  }
  var NS = $("treesvg").namespaceURI, NW = 78, NH = 36, GAP_X = 108, GAP_Y = 46;
  function svgEl(name, attrs, parent) {
    var e = document.createElementNS(NS, name);  // NS: the inline <svg>'s, no address in the page
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    parent.appendChild(e); return e;
  }
  function columns(d) {  // column 0: <s>; column t: the beam after step t
    return [[{pieces: [], score: 0, ended: false, attention: null}]].concat(d.steps.map(function (s) { return s.beam; }));
  }
  function drawTree(d) {
    var svg = $("treesvg"); svg.innerHTML = "";
    $("tree").hidden = !d.steps;
    if (!d.steps) { return; }
    var cols = columns(d), best = [0].concat(d.best_path);
    var rows = Math.max.apply(null, cols.map(function (c) { return c.length; }));
    svg.setAttribute("width", (cols.length - 1) * GAP_X + NW + 8); svg.setAttribute("height", (rows - 1) * GAP_Y + NH + 8);
    var x = function (t) { return 4 + t * GAP_X; }, y = function (i) { return 4 + i * GAP_Y; };
    cols.forEach(function (col, t) {
      if (t) { col.forEach(function (h, i) {
        svgEl("line", {"class": "edge" + (best[t] === i ? " best" : ""), x1: x(t - 1) + NW, y1: y(h.parent) + NH / 2,
                       x2: x(t), y2: y(i) + NH / 2}, svg);
      }); }
    });
    cols.forEach(function (col, t) {
      col.forEach(function (h, i) {
        var g = svgEl("g", {"class": "node" + (h.ended ? " ended" : "") + (h.carried ? " carried" : "") +
                                     (best[t] === i ? " best" : ""),
                            tabindex: 0, role: "button", "data-step": t, "data-index": i,
                            transform: "translate(" + x(t) + "," + y(i) + ")"}, svg);
        svgEl("rect", {width: NW, height: NH, rx: 5}, g);
        if (h.ended) { svgEl("rect", {"class": "inner", x: 3, y: 3, width: NW - 6, height: NH - 6, rx: 3}, g); }
        svgEl("text", {x: NW / 2, y: 15, "text-anchor": "middle"}, g).textContent = t ? h.pieces[h.pieces.length - 1] : "<s>";
        svgEl("text", {"class": "score", x: NW / 2, y: 29, "text-anchor": "middle"}, g).textContent = t ? fmt(h.score) : "";
        svgEl("title", {}, g).textContent = t ? h.pieces.join(" ") + " (" + fmt(h.score) + ")" : "<s>";
        g.addEventListener("click", function () { pick(t, i); });
        g.addEventListener("keydown", function (e) {
          if (e.key === "Enter" || e.key === " ") { pick(t, i); e.preventDefault(); }
        });
      });
    });
  }
  function pick(t, i) {  // a tree node: its attention row on the source words, what it proposed next
    sel = {side: "node", step: t, index: i}; clear();
    var d = DATA[cur], h = columns(d)[t][i];
    $("treesvg").querySelector('.node[data-step="' + t + '"][data-index="' + i + '"]').classList.add("selected");
    if (h.attention) {
      document.querySelectorAll('.tok[data-side="source"]').forEach(function (b) {
        var w = h.attention[+b.dataset.index];
        b.style.background = shade(w); b.style.color = textOn(w);
        b.querySelector(".w").textContent = fmt(w); b.dataset.weight = fmt(w);
      });
    }
    var next = t < d.steps.length ? d.steps[t].candidates.filter(function (c) { return c.parent === i; }) : [];
    var text = t ? "“" + h.pieces.join(" ") + "” " + fmt(h.score) + " (log p " + fmt(h.log_prob) + ")" : "<s>";
    if (h.ended) { text += " — " + L.ended; }
    if (next.length && !h.ended) {
      text += " — " + L.proposed + ": " + next.map(function (c) { return c.piece + " " + fmt(c.score) + (c.kept ? " ✓" : " ✗"); }).join(", ");
    }
    $("detail").textContent = text;
  }
  function restore() { if (sel.side === "node") { pick(sel.step, sel.index); } else { show(sel.side, sel.index); } }
  function clear() {
    document.querySelectorAll(".tok").forEach(function (b) {
      b.classList.remove("selected"); b.style.background = "#fff"; b.style.color = "";
      b.querySelector(".w").textContent = ""; b.removeAttribute("data-weight");
    });
    document.querySelectorAll("#heat td").forEach(function (td) { td.classList.remove("sel"); });
    document.querySelectorAll("#tree .node").forEach(function (n) { n.classList.remove("selected"); });
    $("detail").textContent = "";
  }
  function show(side, i) {
    clear();
    var d = DATA[cur];
    var other = side === "target" ? "source" : "target";
    var weights = side === "target" ? d.weights[i] : d.weights.map(function (row) { return row[i]; });
    document.querySelector('.tok[data-side="' + side + '"][data-index="' + i + '"]').classList.add("selected");
    document.querySelectorAll('.tok[data-side="' + other + '"]').forEach(function (b) {
      var w = weights[+b.dataset.index];
      b.style.background = shade(w); b.style.color = textOn(w);
      b.querySelector(".w").textContent = fmt(w); b.dataset.weight = fmt(w);
    });
    document.querySelectorAll("#heat td").forEach(function (td) {
      if ((side === "target" && +td.dataset.row === i) || (side === "source" && +td.dataset.col === i)) { td.classList.add("sel"); }
    });
    var word = side === "target" ? d.target[i] : d.source[i];
    var best = weights.indexOf(Math.max.apply(null, weights));
    $("detail").textContent = "“" + word + "” " + (side === "target" ? L.attends : L.attended) + " “" +
      (side === "target" ? d.source[best] : d.target[best]) + "” (" + fmt(weights[best]) + ")";
  }
  function select(side, i) { sel = {side: side, index: i}; show(side, i); }
  function go(k) { if (k >= 0 && k < DATA.length) { cur = k; render(); } }
  $("prev").addEventListener("click", function () { go(cur - 1); });
  $("next").addEventListener("click", function () { go(cur + 1); });
  document.addEventListener("keydown", function (e) {
    if (e.key === "ArrowLeft") { go(cur - 1); e.preventDefault(); }
    else if (e.key === "ArrowRight") { go(cur + 1); e.preventDefault(); }
  });
  function load(records) { DATA = records; cur = 0; render(); }
  window.rnnsearchExplorer = {go: go, select: select, pick: pick, load: load, data: function () { return DATA; }};
  render();
})();
</script>
__LIVE_SCRIPT__
</body>
</html>
"""  # noqa: E501


def embedded_cjk_font(text: str) -> str:
    """A CSS @font-face with Noto Sans CJK (regular weight) cut down to the CJK characters in
    `text`, as a data URL — the page shows Chinese even where the system has no CJK font.
    Empty when there is nothing to embed or the font (manimgx-fonts-cjk) is not installed."""
    chars = "".join(sorted({c for c in text if ord(c) >= 0x2E80}))
    if not chars:
        return ""
    try:
        import base64
        import io
        import logging

        import manimgx_fonts_cjk
        from fontTools import subset
        from fontTools.ttLib import TTFont
        from fontTools.varLib import instancer

        logging.getLogger("fontTools").setLevel(logging.ERROR)
        path = Path(manimgx_fonts_cjk.__file__).with_name("NotoSansCJK-VF.otf.ttc")
        font = TTFont(str(path), fontNumber=2)  # the collection's Simplified Chinese face
        options = subset.Options()
        options.layout_features = ["*"]
        options.desubroutinize = True  # self-contained charstrings: robust for tiny subsets
        options.notdef_outline = True
        subsetter = subset.Subsetter(options)
        subsetter.populate(text=chars)
        subsetter.subset(font)
        font = instancer.instantiateVariableFont(font, {"wght": 400})  # variable -> regular weight
        buf = io.BytesIO()
        font.save(buf)
    except Exception:  # no font package or an unreadable font: fall back to the system's fonts
        return ""
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return ("@font-face { font-family: \"rnnsearch-cjk\"; "
            f"src: url(data:font/otf;base64,{data}) format(\"opentype\"); }}")


_LIVE_FORM = """<form id="live">
  <textarea id="input" rows="3" aria-label="__PLACEHOLDER__" placeholder="__PLACEHOLDER__"></textarea>
  <label>__BEAM__ <input id="beam" type="number" min="1" max="32" value="__DEFAULT_BEAM__"></label>
  <button id="go" type="submit">__TRANSLATE__</button>
  <span id="status" aria-live="polite"></span>
</form>"""

# The live page: the same component, fed by POST translate (relative URL, so it works behind a prefix).
_LIVE_SCRIPT = """<script>
(function () {
  "use strict";
  var L = __LABELS__;
  var status = document.getElementById("status");
  document.getElementById("live").addEventListener("submit", function (e) {
    e.preventDefault();
    var texts = document.getElementById("input").value.split("\\n").filter(function (t) { return t.trim(); });
    if (!texts.length) { return; }
    status.textContent = L.working;
    var body = {texts: texts, beam: +document.getElementById("beam").value, attention: true};
    fetch("translate", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)})
      .then(function (r) { return r.json().then(function (j) { return {ok: r.ok, j: j}; }); })
      .then(function (res) {
        if (!res.ok) { status.textContent = res.j.error + (res.j.field ? " (" + res.j.field + ")" : ""); return; }
        status.textContent = "";
        window.rnnsearchExplorer.load(res.j.translations.map(function (t) { return t.attention; })
          .filter(function (a) { return a && a.target.length; }));
      })
      .catch(function (err) { status.textContent = String(err); });
  });
})();
</script>"""  # noqa: E501


def _valid(record: dict, k: int) -> dict:
    src, tgt, w = record.get("source"), record.get("target"), record.get("weights")
    if w is None and isinstance(record.get("steps"), list):
        raise ValueError(f"record {k + 1}: a beam trace with no attention (an RNNencdec model's): "
                         "the page shows attention")
    if not isinstance(src, list) or not isinstance(tgt, list) or not isinstance(w, list):
        raise ValueError(f"attention record {k + 1}: needs source, target and weights lists")
    if len(w) != len(tgt) or any(len(row) != len(src) for row in w):
        raise ValueError(f"attention record {k + 1}: weights must be {len(tgt)} rows of {len(src)}")
    valid = {"source": [str(s) for s in src], "target": [str(t) for t in tgt],
             "weights": [[round(float(x), 4) for x in row] for row in w]}
    if "steps" in record:
        valid.update(_valid_trace(record, k, len(src)))
    return valid


def _valid_trace(record: dict, k: int, n_src: int) -> dict:
    """The search tree's part of a record (engine/decode/beamtrace.py), checked and cut to what
    the page draws."""
    steps, path = record.get("steps"), record.get("best_path")
    if not isinstance(steps, list) or not isinstance(path, list) or len(path) != len(steps):
        raise ValueError(f"record {k + 1}: a beam trace needs steps and a best_path of one index a step")
    out, previous = [], 1
    for t, step in enumerate(steps):
        beam = step.get("beam") if isinstance(step, dict) else None
        if not isinstance(beam, list) or not beam or not 0 <= path[t] < len(beam):
            raise ValueError(f"record {k + 1}, step {t + 1}: no beam, or the best path outside it")
        hyps = []
        for h in beam:
            row = h.get("attention")
            if not 0 <= h.get("parent", -1) < previous or not h.get("pieces") or (
                    row is not None and len(row) != n_src):
                raise ValueError(f"record {k + 1}, step {t + 1}: a hypothesis needs pieces, a parent in the "
                                 f"previous beam and an attention row of {n_src}")
            hyps.append({"pieces": [str(p) for p in h["pieces"]], "score": float(h["score"]),
                         "log_prob": float(h["log_prob"]), "ended": bool(h["ended"]),
                         "carried": bool(h.get("carried")), "parent": int(h["parent"]),
                         "attention": None if row is None else [round(float(x), 4) for x in row]})
        candidates = [{"parent": int(c["parent"]), "piece": str(c["piece"]), "score": float(c["score"]),
                       "kept": bool(c["kept"])} for c in step.get("candidates", [])]
        out.append({"beam": hyps, "candidates": candidates})
        previous = len(beam)
    return {"steps": out, "best_path": [int(i) for i in path]}


def vocabulary_font_text(src_tok, tgt_tok) -> str:
    """The CJK characters of both vocabularies, which a live page embeds a font subset for (at
    most 6,000: a Chinese vocabulary's own characters, not every piece's)."""
    text = "".join(tgt_tok.pieces(range(len(tgt_tok)))) + "".join(src_tok.pieces(range(len(src_tok))))
    return "".join(sorted({c for c in text if ord(c) >= 0x2E80}))[:6000]


def explorer_html(records: list[dict], lang: str = "en", live: bool = False, font_text: str = "",
                  default_beam: int = 5, live_script: str | None = None) -> str:
    """The page for these attention records (empty records are skipped).

    `live`: the page served by ``rnnsearch serve`` — a form above the same component sends the
    sentences to ``POST translate`` and shows the answer; `font_text` lists the characters it
    may need (the model's vocabularies), for the embedded CJK font. `live_script` replaces the
    script that sends the form to the server (tools/browser.py: one that translates in the
    page); ``__LABELS__`` in it becomes the labels.
    """
    if lang not in LABELS:
        raise ValueError(f"unknown language {lang!r} (choose from {', '.join(LABELS)})")
    data = [_valid(r, k) for k, r in enumerate(records) if r and r.get("target")]
    if not data and not live:
        raise ValueError("no sentence with attention to show")
    labels = LABELS[lang]
    # JSON inside <script>: escape "</" so a token like "</s>" cannot close the tag.
    payload = json.dumps(data, ensure_ascii=False).replace("</", "<\\/")
    label_json = json.dumps(labels, ensure_ascii=False).replace("</", "<\\/")
    page = _PAGE.replace("__LIVE__", _LIVE_FORM if live else "")
    page = page.replace("__LIVE_SCRIPT__", (live_script or _LIVE_SCRIPT) if live else "")
    for key, value in (("__TITLE__", labels["title"]), ("__HINT__", labels["hint"]),
                       ("__PREV__", labels["prev"]), ("__NEXT__", labels["next"]),
                       ("__SOURCE__", labels["source"]), ("__TARGET__", labels["target"]),
                       ("__HEATMAP__", labels["heatmap"]), ("__TREE__", labels["tree"]),
                       ("__TREEHINT__", labels["treehint"]),
                       ("__PLACEHOLDER__", labels["placeholder"]), ("__BEAM__", labels["beam"]),
                       ("__TRANSLATE__", labels["translate"]), ("__DEFAULT_BEAM__", str(int(default_beam)))):
        page = page.replace(key, html.escape(value))
    page = page.replace("__LANG__", "zh-CN" if lang == "zh" else "en")
    page = page.replace("__FONTFACE__",
                        embedded_cjk_font(payload + font_text + json.dumps(labels, ensure_ascii=False)))
    page = page.replace("__LABELS__", label_json)
    return page.replace("__DATA__", payload)


def write_explorer(path: str | Path, records: list[dict], lang: str = "en") -> Path:
    """Write the interactive attention explorer: one self-contained HTML page (no network).

    `records` are attention records as `Translation.attention_json` returns them
    (``{"source": [...], "target": [...], "weights": [[...], ...]}``); click a target word on
    the page to see its row. Records of engine/decode/beamtrace.py (``translate --beam-trace``'s
    file, as json.load reads it) also draw each sentence's search as a tree: click a node for its
    attention row. ``lang="zh"`` gives Chinese labels.
    """
    path = Path(path)
    atomic_write_text(path, explorer_html(records, lang))
    return path
