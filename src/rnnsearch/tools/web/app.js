// The page's translator: rnnsearch's greedy search in the browser, over the two ONNX graphs of
// `rnnsearch export --format onnx` run by onnxruntime-web, with the sentencepiece-equal tokeniser
// of tokenizer.js. It follows the torch-free runtime (rnnsearch_runtime/search.py) step for step,
// beam 1, so a typed sentence gets the translation `rnnsearch translate --beam 1` gives it.
//
// Everything arrives through classic <script> tags (window.RNNSEARCH: onnxruntime-web's module
// source and WebAssembly binary, tokenizer.js's source, the model's files as base64), because a
// page opened from file:// may load neither ES modules nor files by fetch(); the two modules are
// imported from blob: URLs instead.
(function () {
  "use strict";
  var R = window.RNNSEARCH;

  function bytes(base64) {
    if (Uint8Array.fromBase64) { return Uint8Array.fromBase64(base64); }
    var s = atob(base64), out = new Uint8Array(s.length);
    for (var i = 0; i < s.length; i++) { out[i] = s.charCodeAt(i); }
    return out;
  }

  function moduleFrom(source) {
    return import(URL.createObjectURL(new Blob([source], {type: "text/javascript"})));
  }

  async function start() {
    var ort = await moduleFrom(R.ort.module);
    ort.env.wasm.wasmBinary = bytes(R.ort.wasm);
    ort.env.wasm.numThreads = 1;  // threads need a cross-origin-isolated server; file:// is not one
    var tok = await moduleFrom(R.tokenizer);
    var m = R.model.manifest, files = R.model.files;
    var reader = m.tokenizer.kind === "word"
      ? function (name) { return new tok.Words(new TextDecoder().decode(bytes(files[name]))); }
      : function (name) { return tok.SentencePiece.fromBytes(bytes(files[name])); };
    return {
      ort: ort, tok: tok, manifest: m,
      source: reader(m.tokenizer.source), target: reader(m.tokenizer.target),
      encoder: await ort.InferenceSession.create(bytes(files[m.encoder])),
      step: await ort.InferenceSession.create(bytes(files[m.step])),
      attends: m.arch !== "rnnencdec",  // RNNencdec reads one fixed context: no attention to show
    };
  }

  function int64(ort, values, dims) {
    return new ort.Tensor("int64", BigInt64Array.from(values.map(function (v) { return BigInt(v); })), dims);
  }

  // The best next word: the highest log-probability, <s> and <pad> never; </s> once the
  // hypothesis has as many words as the limit (rnnsearch's max_len_ratio * source length + 10).
  function nextWord(logP, ids, forced) {
    if (forced) { return ids.eos; }
    var best = -1, top = -Infinity;
    for (var w = 0; w < logP.length; w++) {
      if (w !== ids.bos && w !== ids.pad && logP[w] > top) { top = logP[w]; best = w; }
    }
    return best;
  }

  // Greedy search over one piece of a source (at most max_source_len ids): its words (</s>
  // included) and one attention row per word over the piece, in reading order.
  async function search(M, ids) {
    var m = M.manifest, ort = M.ort, S = ids.length;
    var src = m.reverse_source ? ids.slice().reverse() : ids;
    var mask = new ort.Tensor("bool", new Uint8Array(S).fill(1), [1, S]);
    var enc = await M.encoder.run({src: int64(ort, src, [1, S]), src_mask: mask});
    // the limit as the search computes it, in float32
    var limit = Math.trunc(Math.fround(Math.fround(m.decode.max_len_ratio) * S)) + 10;
    var state = enc.state, words = [], rows = [], y = m.ids.bos;
    for (;;) {
      var feeds = {y_prev: int64(ort, [y], [1]), state: state};
      Object.keys(enc).forEach(function (k) { if (k !== "state") { feeds[k] = enc[k]; } });
      if ("annotations" in enc) { feeds.src_mask = mask; }
      var out = await M.step.run(feeds);
      y = nextWord(out.log_p.data, m.ids, words.length >= limit);
      words.push(y);
      if (out.alpha) {
        var row = Array.from(out.alpha.data);
        rows.push(m.reverse_source ? row.reverse() : row);
      }
      if (y === m.ids.eos) { return {words: words, rows: rows}; }
      state = out.new_state;
    }
  }

  // One sentence: normalised, tokenised, split into pieces of max_source_len ids, each searched;
  // the words joined and the attention rows laid over the whole source (the runtime's _result).
  async function translateOne(M, text) {
    var m = M.manifest;
    var ids = M.source.encode(M.tok.normalize(text, m.lowercase));
    var limit = m.decode.max_source_len, words = [], rows = [];
    for (var start = 0; start < ids.length; start += limit) {
      var piece = ids.slice(start, start + limit);
      var found = await search(M, piece);
      var last = start + limit >= ids.length;
      var n = last ? found.words.length : found.words.length - 1;  // </s> ends the sentence only
      for (var t = 0; t < n; t++) {
        var full = new Array(ids.length).fill(0);
        (found.rows[t] || []).forEach(function (w, j) { full[start + j] = w; });
        rows.push(full);
      }
      words = words.concat(found.words.slice(0, found.words.length - 1));
    }
    return {
      source: text, text: M.target.decode(words), tokens: M.target.pieces(words),
      source_tokens: M.source.pieces(ids), attention: M.attends ? rows : null,
    };
  }

  var ready = start();
  async function translate(texts) {
    var M = await ready, out = [];
    for (var k = 0; k < texts.length; k++) { out.push(await translateOne(M, texts[k])); }
    return out;
  }
  window.rnnsearchWeb = {ready: ready, translate: translate};

  // The form above the explorer: one sentence a line, translated here, shown there.
  var L = R.labels, status = document.getElementById("status");
  var list = document.createElement("ol");
  list.id = "translations";
  document.getElementById("live").after(list);
  document.getElementById("beam").closest("label").hidden = true;  // the page searches greedily
  var go = document.getElementById("go");
  go.disabled = true;
  status.textContent = L.loading;
  ready.then(function () { go.disabled = false; status.textContent = ""; },
             function (err) { status.textContent = String(err); });
  document.getElementById("live").addEventListener("submit", function (e) {
    e.preventDefault();
    var texts = document.getElementById("input").value.split("\n").filter(function (t) { return t.trim(); });
    if (!texts.length) { return; }
    status.textContent = L.working;
    translate(texts).then(function (found) {
      status.textContent = "";
      list.innerHTML = "";
      found.forEach(function (t) {
        var li = document.createElement("li");
        li.textContent = t.text;
        list.appendChild(li);
      });
      window.rnnsearchExplorer.load(found.filter(function (t) { return t.attention && t.tokens.length; })
        .map(function (t) {
          return {source: t.source_tokens, target: t.tokens.concat(["</s>"]), weights: t.attention};
        }));
    }, function (err) { status.textContent = String(err); });
  });
})();
