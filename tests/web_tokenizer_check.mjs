// Runs the browser's tokeniser (src/rnnsearch/tools/web/tokenizer.js) on a job, for
// tests/test_web_tokenizer.py to compare with Python.
//
//   node tests/web_tokenizer_check.mjs JOB.json   one job, or a list of jobs, from a file
//   node tests/web_tokenizer_check.mjs --lines    one job a line on stdin, one answer a line
//
// A job: {"model": a .model file or a word vocabulary, "kind": "spm" | "word", "lowercase": bool,
// "texts": [...], optional: "decode": [[id, ...], ...], "normalize": false}. Its answer:
// {"normalized": [...], "ids": [[...]], "pieces": [[...]], "words": [[...]], "decoded": [...],
// "decoded_ids": [...]}: each text normalised as the runtime does (unless "normalize" is false),
// encoded, its ids' pieces, their words (wordOf) and the ids decoded; then each of "decode"
// decoded. A job that fails answers {"error": message}.

import {readFileSync} from "node:fs";
import {createInterface} from "node:readline";
import {SentencePiece, Words, normalize, wordOf} from "../src/rnnsearch/tools/web/tokenizer.js";

const loaded = new Map();

function tokenizer(job) {
  const key = `${job.kind} ${job.model}`;
  if (!loaded.has(key)) {
    const bytes = readFileSync(job.model);
    // ignoreBOM keeps a byte-order mark in the text, as Python's read_text(encoding="utf-8") does.
    const tok = job.kind === "word" ? new Words(new TextDecoder("utf-8", {ignoreBOM: true}).decode(bytes))
      : SentencePiece.fromBytes(new Uint8Array(bytes));
    loaded.set(key, tok);
  }
  return loaded.get(key);
}

function run(job) {
  try {
    const tok = tokenizer(job);
    const normalized = job.normalize === false ? job.texts : job.texts.map((t) => normalize(t, job.lowercase));
    const ids = normalized.map((t) => tok.encode(t));
    const pieces = ids.map((i) => tok.pieces(i));
    return {normalized, ids, pieces, words: pieces.map(wordOf), decoded: ids.map((i) => tok.decode(i)),
      decoded_ids: (job.decode ?? []).map((i) => tok.decode(i))};
  } catch (e) {
    return {error: e.message};
  }
}

if (process.argv[2] === "--lines") {
  for await (const line of createInterface({input: process.stdin})) {
    process.stdout.write(JSON.stringify(run(JSON.parse(line))) + "\n");
  }
} else if (process.argv.length === 3) {
  const job = JSON.parse(readFileSync(process.argv[2], "utf-8"));
  process.stdout.write(JSON.stringify(Array.isArray(job) ? job.map(run) : run(job)) + "\n");
} else {
  process.stderr.write("usage: node web_tokenizer_check.mjs JOB.json | --lines\n");
  process.exit(2);
}
