// The browser's tokenisers, id for id those of the torch-free runtime (rnnsearch_runtime/search.py):
// `normalize`, word vocabularies (`Words`), sentencepiece models read from their .model bytes
// (`SentencePiece`: BPE and unigram, byte fallback) and `wordOf`. One dependency-free ES module.
//
// SentencePiece follows sentencepiece's C++ sources rule for rule; the comments name the file and
// function each part follows (normalizer.cc, bpe_model.cc, unigram_model.cc,
// sentencepiece_processor.cc, model_interface.cc). Like them it works on UTF-8 bytes where
// sentencepiece does (the normaliser's trie) and on Unicode characters elsewhere, so astral
// characters (emoji) are one character, never two UTF-16 halves.

const SPACE = "\u2581"; // "▁": sentencepiece's mark for a space
const SPACE_BYTES = [0xe2, 0x96, 0x81];
const UNK_SURFACE = " \u2047 "; // trainer_spec.unk_surface's default: " ⁇ "
const UNK_PENALTY = 10; // unigram_model.cc kUnkPenalty
const FLT_MAX = 3.4028234663852886e38;
const FLT_MIN = 1.1754943508222875e-38; // the smallest normal float: unigram's initial max_score_
const [NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE] = [1, 2, 3, 4, 5, 6];
const MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"};

// Python's str.split() splits at these (whitespace by Unicode's bidirectional class or Zs).
const PY_WHITESPACE = /[\t\n\v\f\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/u;

/** Python's `text.split()`: the words between whitespace runs. */
function pySplit(text) {
  return text.split(PY_WHITESPACE).filter((w) => w !== "");
}

/** The runtime's normalize(): control characters (Cc) become spaces, format characters (Cf)
 * other than the zero-width (non-)joiners go, whitespace runs collapse to one space and the ends
 * are trimmed as Python's str.split() does; lower-cased where the model was trained so. */
export function normalize(text, lowercase = false) {
  const kept = text.replace(/\p{Cc}/gu, " ").replace(/(?![\u200c\u200d])\p{Cf}/gu, "");
  const joined = pySplit(kept).join(" ");
  return lowercase ? joined.toLowerCase() : joined;
}

/** The runtime's _word_of(): the word each piece belongs to, a new word at each piece starting
 * with "▁" (and at the first); for word vocabularies (no "▁" at all) every piece is a word. */
export function wordOf(pieces) {
  if (!pieces.some((p) => p.startsWith(SPACE))) return pieces.map((_, i) => i);
  let k = -1;
  return pieces.map((p, i) => (k += p.startsWith(SPACE) || i === 0 ? 1 : 0));
}

function checkId(id, size) {
  if (!Number.isInteger(id) || id < 0 || id >= size) {
    throw new RangeError(`token id ${id} is out of range (the vocabulary has ${size})`);
  }
}

/** A word vocabulary (the runtime's _Words), from its file's text: <pad> <unk> <s> </s>, then
 * one word a line. Encoding splits at whitespace; an unknown word is <unk> (1). */
export class Words {
  constructor(text) {
    // Python's read_text() reads "\r\n" and "\r" as "\n" (universal newlines).
    this.itos = text.replace(/\r\n?/g, "\n").split("\n");
    if (this.itos.length && this.itos[this.itos.length - 1] === "") this.itos.pop();
    this.stoi = new Map(this.itos.map((w, i) => [w, i]));
  }

  encode(text) {
    return pySplit(text).map((w) => this.stoi.get(w) ?? 1);
  }

  pieces(ids) {
    return ids.map((id) => (checkId(id, this.size), this.itos[id]));
  }

  decode(ids) {
    return this.pieces(ids).join(" ");
  }

  get size() {
    return this.itos.length;
  }
}

// ---- UTF-8 ----------------------------------------------------------------------------------

const ENCODER = new TextEncoder();
const DECODER = new TextDecoder();
const utf8 = (text) => ENCODER.encode(text);
const fromUtf8 = (bytes) => DECODER.decode(Uint8Array.from(bytes));

/** util.cc DecodeUTF8: [code point, bytes used] of the character at bytes[i], or [-1, 1] where
 * the bytes there are no valid UTF-8 (sentencepiece then uses U+FFFD for that one byte). */
function decodeUtf8(bytes, i) {
  const b = bytes[i];
  const trail = (k) => i + k < bytes.length && (bytes[i + k] & 0xc0) === 0x80;
  const bits = (k) => bytes[i + k] & 0x3f;
  const valid = (cp, lo) => cp >= lo && (cp < 0xd800 || (cp >= 0xe000 && cp <= 0x10ffff));
  let cp;
  if (b < 0x80) return [b, 1];
  if ((b & 0xe0) === 0xc0 && trail(1)) {
    if (valid((cp = ((b & 0x1f) << 6) | bits(1)), 0x80)) return [cp, 2];
  } else if ((b & 0xf0) === 0xe0 && trail(1) && trail(2)) {
    if (valid((cp = ((b & 0x0f) << 12) | (bits(1) << 6) | bits(2)), 0x800)) return [cp, 3];
  } else if ((b & 0xf8) === 0xf0 && trail(1) && trail(2) && trail(3)) {
    cp = ((b & 0x07) << 18) | (bits(1) << 12) | (bits(2) << 6) | bits(3);
    if (valid(cp, 0x10000)) return [cp, 4];
  }
  return [-1, 1];
}

/** Bytes to text as sentencepiece_processor.cc Decode's ProcessBytePieces does: each byte that
 * starts no valid character becomes one U+FFFD. */
function bytesToText(bytes) {
  let text = "";
  for (let i = 0; i < bytes.length; ) {
    const [cp, n] = decodeUtf8(bytes, i);
    text += cp < 0 ? "\ufffd" : String.fromCodePoint(cp);
    i += n;
  }
  return text;
}

// ---- The .model file: a serialized ModelProto (sentencepiece_model.proto) --------------------

/** The fields of one protobuf message: {field, wire, value}; value is a number for varints (the
 * low 32 bits, unsigned) and fixed32 floats, a Uint8Array for length-delimited fields. */
function protoFields(bytes, what) {
  const fail = (why) => {
    throw new Error(`not a sentencepiece model: ${what} ${why}`);
  };
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let pos = 0;
  const varint = () => {
    let low = 0;
    for (let shift = 0; ; shift += 7) {
      if (pos >= bytes.length || shift > 63) fail("has a broken number");
      const b = bytes[pos++];
      if (shift < 32) low |= (b & 0x7f) << shift;
      if (!(b & 0x80)) return low >>> 0;
    }
  };
  const fields = [];
  while (pos < bytes.length) {
    const key = varint();
    const [field, wire] = [key >>> 3, key & 7];
    let value = null;
    if (wire === 0) {
      value = varint();
    } else if (wire === 1) {
      pos += 8;
    } else if (wire === 2) {
      const length = varint();
      value = bytes.subarray(pos, pos + length);
      pos += length;
    } else if (wire === 5) {
      if (pos + 4 <= bytes.length) value = view.getFloat32(pos, true);
      pos += 4;
    } else {
      fail(`field ${field} has an unknown wire type ${wire}`);
    }
    if (pos > bytes.length) fail(`field ${field} runs past the end`);
    fields.push({field, wire, value});
  }
  return fields;
}

/** Reads `message` into an object of defaults by a table field number -> [name, kind]. */
function readMessage(bytes, what, table, defaults) {
  const out = {...defaults};
  for (const {field, wire, value} of protoFields(bytes, what)) {
    const [name, kind] = table[field] ?? [];
    if (!name) continue;
    const ok = {int: 0, bool: 0, float: 5, string: 2, bytes: 2}[kind] === wire;
    if (!ok) throw new Error(`not a sentencepiece model: ${what}.${name} has the wrong wire type`);
    out[name] = kind === "int" ? value | 0 : kind === "bool" ? value !== 0
      : kind === "string" ? DECODER.decode(value) : value;
  }
  return out;
}

const PIECE = {1: ["piece", "string"], 2: ["score", "float"], 3: ["type", "int"]};
const TRAINER = {3: ["modelType", "int"], 24: ["treatWhitespaceAsSuffix", "bool"],
  35: ["byteFallback", "bool"], 44: ["unkSurface", "string"]};
const NORMALIZER = {1: ["name", "string"], 2: ["charsmap", "bytes"], 3: ["addDummyPrefix", "bool"],
  4: ["removeExtraWhitespaces", "bool"], 5: ["escapeWhitespaces", "bool"]};
const NORMALIZER_DEFAULTS = {name: "", charsmap: null, addDummyPrefix: true,
  removeExtraWhitespaces: true, escapeWhitespaces: true};

/** ModelProto: pieces (1), trainer_spec (2), normalizer_spec (3), denormalizer_spec (5). */
function parseModel(bytes) {
  const model = {pieces: [], normalizer: {...NORMALIZER_DEFAULTS}, denormalizer: null,
    trainer: {modelType: 1, treatWhitespaceAsSuffix: false, byteFallback: false, unkSurface: UNK_SURFACE}};
  for (const {field, wire, value} of protoFields(bytes, "the model")) {
    if (wire !== 2) continue;
    if (field === 1) model.pieces.push(readMessage(value, "a piece", PIECE, {piece: "", score: 0, type: NORMAL}));
    if (field === 2) model.trainer = readMessage(value, "trainer_spec", TRAINER, model.trainer);
    if (field === 3) model.normalizer = readMessage(value, "normalizer_spec", NORMALIZER, NORMALIZER_DEFAULTS);
    if (field === 5) model.denormalizer = readMessage(value, "denormalizer_spec", NORMALIZER, NORMALIZER_DEFAULTS);
  }
  return model;
}

// ---- The normaliser (normalizer.cc) -----------------------------------------------------------

/** The precompiled charsmap: a uint32 (little-endian) trie size, a darts-clone double-array trie
 * over UTF-8 byte strings, then the replacement strings, each ended by a NUL byte. */
class CharsMap {
  constructor(blob) {
    const view = new DataView(blob.buffer, blob.byteOffset, blob.byteLength);
    const size = blob.length > 4 ? view.getUint32(0, true) : -1;
    if (size < 0 || size % 4 || size + 4 >= blob.length) {
      throw new Error("not a sentencepiece model: normalizer_spec.precompiled_charsmap is broken");
    }
    this.units = new Uint32Array(size / 4).map((_, k) => view.getUint32(4 + 4 * k, true));
    this.strings = blob.subarray(4 + size);
  }

  /** The longest rule matching bytes[start...] (darts-clone commonPrefixSearch; normalizer.cc
   * NormalizePrefix keeps the longest): [bytes matched, replacement bytes], or null. */
  longest(bytes, start) {
    const offset = (unit) => (unit >>> 10) << ((unit & (1 << 9)) >>> 6);
    const units = this.units;
    let node = offset(units[0]);
    let found = null;
    for (let i = start; i < bytes.length; i++) {
      node ^= bytes[i];
      const unit = units[node];
      if (unit === undefined || (unit & 0x800000ff) >>> 0 !== bytes[i]) break;
      node ^= offset(unit);
      if ((unit >>> 8) & 1) found = [i - start + 1, units[node] & 0x7fffffff];
    }
    if (!found) return null;
    const end = this.strings.indexOf(0, found[1]);
    return [found[0], this.strings.subarray(found[1], end < 0 ? undefined : end)];
  }
}

/** The longest of `symbols` (UTF-8 byte arrays) at bytes[start...], or 0 (PrefixMatcher). */
function longestSymbol(symbols, bytes, start) {
  let best = 0;
  for (const s of symbols) {
    if (s.length > best && s.every((b, k) => bytes[start + k] === b)) best = s.length;
  }
  return best;
}

/** normalizer.cc NormalizePrefix: [replacement bytes, bytes consumed] for the text at `start`:
 * a user-defined symbol as it is, else the longest charsmap rule, else one character. */
function normalizePrefix(spec, bytes, start) {
  const symbol = longestSymbol(spec.userSymbols, bytes, start);
  if (symbol) return [bytes.subarray(start, start + symbol), symbol];
  const rule = spec.charsMap ? spec.charsMap.longest(bytes, start) : null;
  if (rule) return [rule[1], rule[0]];
  const [cp, n] = decodeUtf8(bytes, start);
  return cp < 0 ? [[0xef, 0xbf, 0xbd], 1] : [bytes.subarray(start, start + n), n];
}

/** normalizer.cc Normalize: the rules applied chunk by chunk, then the whitespace rules:
 * leading and repeated spaces dropped, trailing ones removed (remove_extra_whitespaces), a space
 * put first (add_dummy_prefix; last with treat_whitespace_as_suffix), spaces written "▁". */
function normalizeText(spec, text) {
  const bytes = utf8(text);
  let pos = 0;
  while (spec.removeExtraWhitespaces && pos < bytes.length) {
    const [chunk, used] = normalizePrefix(spec, bytes, pos);
    if (chunk.length !== 1 || chunk[0] !== 0x20) break;
    pos += used;
  }
  if (pos >= bytes.length) return "";
  const ws = spec.escapeWhitespaces ? SPACE_BYTES : [0x20];
  const out = [];
  if (spec.addDummyPrefix && !spec.wsAsSuffix) out.push(...ws);
  let prevSpace = spec.removeExtraWhitespaces;
  while (pos < bytes.length) {
    const [chunk, used] = normalizePrefix(spec, bytes, pos);
    let k = 0;
    while (prevSpace && k < chunk.length && chunk[k] === 0x20) k++;
    if (k < chunk.length) {
      for (; k < chunk.length; k++) out.push(...(chunk[k] === 0x20 ? ws : [chunk[k]]));
      prevSpace = chunk[chunk.length - 1] === 0x20;
    }
    pos += used;
    if (!spec.removeExtraWhitespaces) prevSpace = false;
  }
  const endsWithWs = () => out.length >= ws.length && ws.every((b, k) => out[out.length - ws.length + k] === b);
  while (spec.removeExtraWhitespaces && endsWithWs()) out.length -= ws.length;
  if (spec.addDummyPrefix && spec.wsAsSuffix) out.push(...ws);
  return fromUtf8(out);
}

// ---- The model -------------------------------------------------------------------------------

/** A sentencepiece model (the runtime's _Pieces): encode, pieces, decode, size. */
export class SentencePiece {
  /** The model from the bytes of its .model file (a serialized ModelProto). */
  static fromBytes(bytes) {
    return new SentencePiece(parseModel(bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes)));
  }

  constructor(model) {
    const type = MODEL_TYPES[model.trainer.modelType] ?? `number ${model.trainer.modelType}`;
    if (type !== "bpe" && type !== "unigram") {
      throw new Error(`sentencepiece model_type ${type} is not supported (only bpe and unigram)`);
    }
    this.model = model;
    this.isBpe = type === "bpe";
    this.byteFallback = model.trainer.byteFallback;
    this.initializePieces(model.pieces);
    const symbols = [...this.userDefined].map((p) => Array.from(utf8(p)));
    const spec = (s, userSymbols, wsAsSuffix) => ({...s, userSymbols, wsAsSuffix,
      charsMap: s.charsmap && s.charsmap.length ? new CharsMap(s.charsmap) : null});
    this.normalizer = spec(model.normalizer, symbols, model.trainer.treatWhitespaceAsSuffix);
    const denorm = model.denormalizer;
    this.denormalizer = denorm && denorm.charsmap && denorm.charsmap.length ? spec(denorm, [], false) : null;
  }

  /** model_interface.cc InitializePieces: normal, user-defined and unused pieces are looked up
   * by the models; unknown, control and byte pieces are reserved (looked up first by PieceToId). */
  initializePieces(pieces) {
    const fail = (why) => {
      throw new Error(`not a usable sentencepiece model: ${why}`);
    };
    this.vocab = new Map();
    this.reserved = new Map();
    this.userDefined = new Set();
    this.unkId = -1;
    pieces.forEach(({piece, type}, id) => {
      if (!piece) fail(`piece ${id} is empty`);
      const table = [NORMAL, USER_DEFINED, UNUSED].includes(type) ? this.vocab : this.reserved;
      if (table.has(piece)) fail(`piece ${JSON.stringify(piece)} is defined twice`);
      table.set(piece, id);
      if (type === USER_DEFINED) this.userDefined.add(piece);
      if (type === UNKNOWN) this.unkId = this.unkId < 0 ? id : fail("unk is defined twice");
      if (type === BYTE && !this.byteFallback) fail(`byte piece ${piece} but no byte_fallback`);
      if (type === BYTE && !/^<0x[0-9A-F]{2}>$/.test(piece)) fail(`byte piece ${piece} is not <0xNN>`);
    });
    if (this.unkId < 0) fail("no unk piece");
    const bytes = Array.from({length: 256}, (_, b) => this.reserved.get(bytePiece(b)));
    if (this.byteFallback && bytes.some((id) => id === undefined || pieces[id].type !== BYTE)) {
      fail("byte_fallback without the 256 byte pieces");
    }
    this.maxLength = [...this.vocab.keys()].reduce((m, p) => Math.max(m, Array.from(p).length), 0);
    const normal = pieces.filter((p) => p.type === NORMAL).map((p) => p.score);
    this.minScore = normal.reduce((a, b) => Math.min(a, b), FLT_MAX);
    this.maxScore = normal.reduce((a, b) => Math.max(a, b), FLT_MIN);
  }

  get size() {
    return this.model.pieces.length;
  }

  typeOf(id) {
    return this.model.pieces[id].type;
  }

  /** model_interface.cc PieceToId: reserved pieces first, then the vocabulary, else <unk>. */
  pieceToId(piece) {
    return this.reserved.get(piece) ?? this.vocab.get(piece) ?? this.unkId;
  }

  /** The ids of `text`, as sentencepiece's encode(text) gives them. */
  encode(text) {
    const normalized = normalizeText(this.normalizer, text);
    if (!normalized) return [];
    const result = this.isBpe ? bpeEncode(this, normalized) : unigramEncode(this, normalized);
    return this.toIds(result);
  }

  /** sentencepiece_processor.cc PopulateSentencePieceText: unknown pieces become their UTF-8
   * bytes' pieces under byte_fallback; otherwise a run of unknown pieces is one <unk>. */
  toIds(result) {
    const ids = [];
    let prevUnknown = false;
    for (const [piece, id] of result) {
      const unknown = this.typeOf(id) === UNKNOWN;
      if (unknown && this.byteFallback) {
        for (const b of utf8(piece)) ids.push(this.pieceToId(bytePiece(b)));
      } else if (!(unknown && prevUnknown)) {
        ids.push(id);
      }
      prevUnknown = unknown;
    }
    return ids;
  }

  /** Each id's piece (id_to_piece). */
  pieces(ids) {
    return ids.map((id) => (checkId(id, this.size), this.model.pieces[id].piece));
  }

  /** The text of `ids`, as sentencepiece's decode(ids) gives it (sentencepiece_processor.cc
   * Decode): control pieces vanish, <unk> reads " ⁇ ", runs of byte pieces are read as UTF-8,
   * "▁" is a space, and the leading space that add_dummy_prefix put there is dropped. */
  decode(ids) {
    let text = "";
    let bytes = [];
    let bosSpace = true; // a leading "▁" may still be dropped
    let bosSpaceSeen = false;
    for (const piece of this.pieces(ids)) {
      const id = this.pieceToId(piece);
      if (this.typeOf(id) === BYTE) {
        bytes.push(parseInt(piece.slice(3, 5), 16));
        continue;
      }
      text += bytesToText(bytes);
      bytes = [];
      if (bosSpaceSeen || text !== "") bosSpace = false;
      let surface;
      [surface, bosSpaceSeen] = this.decodePiece(piece, id, bosSpace);
      text += surface;
    }
    text += bytesToText(bytes);
    return this.denormalizer ? normalizeText(this.denormalizer, text) : text;
  }

  /** Decode's DecodeSentencePiece: [surface, whether a leading "▁" was dropped]. */
  decodePiece(piece, id, bosSpace) {
    const type = this.typeOf(id);
    if (type === CONTROL) return ["", false];
    if (type === UNKNOWN) return [this.model.trainer.unkSurface, false];
    const spec = this.model.normalizer;
    let dropped = false;
    if (bosSpace && (spec.addDummyPrefix || spec.removeExtraWhitespaces) && piece.startsWith(SPACE)) {
      piece = piece.slice(SPACE.length);
      dropped = !spec.removeExtraWhitespaces; // then every leading space goes, not just one
    }
    return [piece.replaceAll(SPACE, " "), dropped];
  }
}

function bytePiece(b) {
  return `<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`;
}

// ---- BPE (bpe_model.cc) ---------------------------------------------------------------------

/** bpe_model.cc SampleEncode without dropout: [piece, id] of `normalized`. The symbols start as
 * its characters (a user-defined symbol is one symbol, never merged); then, again and again, the
 * adjacent pair whose concatenation is a vocabulary piece with the highest score is merged (ties:
 * the leftmost). Unused pieces may be merged, and are then split back the way they were made. */
function bpeEncode(model, normalized) {
  const symbols = splitSymbols(model, normalized);
  const unmerge = new Map(); // an unused piece -> its last seen [left, right]
  const pairScore = (i) => {
    const [left, right] = [symbols[i], symbols[i + 1]];
    if (left.frozen || right.frozen) return null;
    const id = model.vocab.get(left.piece + right.piece);
    if (id === undefined) return null;
    if (model.typeOf(id) === UNUSED) unmerge.set(left.piece + right.piece, [left.piece, right.piece]);
    return model.model.pieces[id].score;
  };
  const scores = symbols.slice(1).map((_, i) => pairScore(i));
  for (;;) {
    let best = -1;
    scores.forEach((s, i) => {
      if (s !== null && (best < 0 || s > scores[best])) best = i;
    });
    if (best < 0) break;
    symbols.splice(best, 2, {piece: symbols[best].piece + symbols[best + 1].piece, frozen: false});
    scores.splice(best, 1);
    if (best > 0) scores[best - 1] = pairScore(best - 1);
    if (best < symbols.length - 1) scores[best] = pairScore(best);
  }
  const out = [];
  const resegment = (piece) => {
    const id = model.pieceToId(piece);
    const parts = model.typeOf(id) === UNUSED ? unmerge.get(piece) : undefined;
    if (parts) parts.forEach(resegment);
    else out.push([piece, id]);
  };
  symbols.forEach((s) => resegment(s.piece));
  return out;
}

/** The first symbols: the longest user-defined symbol at each place, else one character. */
function splitSymbols(model, normalized) {
  const symbols = [];
  for (let at = 0; at < normalized.length; ) {
    let piece = String.fromCodePoint(normalized.codePointAt(at));
    for (const s of model.userDefined) {
      if (s.length > piece.length && normalized.startsWith(s, at)) piece = s;
    }
    symbols.push({piece, frozen: model.userDefined.has(piece)});
    at += piece.length;
  }
  return symbols;
}

// ---- Unigram (unigram_model.cc) -------------------------------------------------------------

/** unigram_model.cc EncodeOptimized: the Viterbi path through the lattice of vocabulary pieces
 * (unused ones left out), each scored by its log probability; a user-defined piece scores
 * length (UTF-8 bytes) x the highest score - 0.1; a character no piece covers alone gets an
 * <unk> node scored min_score - 10. Scores add up in float32, as in C++; ties keep the earlier. */
function unigramEncode(model, normalized) {
  const chars = Array.from(normalized);
  const best = Array.from({length: chars.length + 1}, () => ({score: 0, start: -1, id: -1}));
  const unkScore = Math.fround(model.minScore - UNK_PENALTY);
  const offer = (end, score, start, id) => {
    const node = best[end];
    if (node.start === -1 || score > node.score) Object.assign(node, {score: Math.fround(score), start, id});
  };
  for (let start = 0; start < chars.length; start++) {
    const base = best[start].score;
    let single = false;
    let piece = "";
    for (let end = start + 1; end <= Math.min(chars.length, start + model.maxLength); end++) {
      piece += chars[end - 1];
      const id = model.vocab.get(piece);
      if (id === undefined || model.typeOf(id) === UNUSED) continue;
      const score = model.typeOf(id) === USER_DEFINED
        ? Math.fround(utf8(piece).length * model.maxScore) - 0.1 + base // double, as in C++
        : Math.fround(model.model.pieces[id].score + base);
      offer(end, score, start, id);
      single ||= end === start + 1;
    }
    if (!single) offer(start + 1, Math.fround(unkScore + base), start, model.unkId);
  }
  const out = [];
  for (let end = chars.length; end > 0; end = best[end].start) {
    out.push([chars.slice(best[end].start, end).join(""), best[end].id]);
  }
  return out.reverse();
}
