#!/usr/bin/env python3
"""Generates tests/model/test_hf_tokenizer_cases.inc: small hand-written tokenizer.json files, one
per component and option, with the ids and texts Hugging Face's tokenizers (npm `tokenizers`
0.23.2, the Rust library) gives for them. Run from the repository root:
  python3 tests/model/gen_hf_cases.py /path/to/node_modules/tokenizers
"""
import json, subprocess, sys

NODE_TOK = sys.argv[1] if len(sys.argv) > 1 else '/work/main/e2e/hf/node_modules/tokenizers'

def bytes_to_unicode():
    bs = list(range(ord('!'), ord('~') + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b); cs.append(256 + n); n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}

B2U = bytes_to_unicode()

def bytelevel_model(merges, pair_form=False, **opts):
    vocab = {B2U[b]: i for i, b in enumerate(sorted(B2U))}
    for m in merges:
        a, b = m.split(' ')
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
             "vocab": vocab, "merges": [m.split(' ') for m in merges] if pair_form else merges}
    model.update(opts)
    return model

def sp_model(merges, extra=(), **opts):
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for c in list("▁abcdefghijklmnopqrstuvwxyzHTW.,!'") + list(extra):
        vocab.setdefault(c, len(vocab))
    cut = len(opts.get("continuing_subword_prefix") or "")
    for m in merges:
        a, b = m.split(' ')
        vocab.setdefault(a + b[cut:], len(vocab))
    model = {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
             "vocab": vocab, "merges": merges}
    model.update(opts)
    return model

def added(id_, content, special=True, normalized=False, lstrip=False, rstrip=False, single_word=False):
    return {"id": id_, "content": content, "single_word": single_word, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": normalized, "special": special}

def doc(model, added_tokens=(), normalizer=None, pre=None, post=None, decoder=None):
    # Ids as the Rust library assigns them: the vocabulary's, else the next after the model's.
    nxt = len(model["vocab"])
    added_tokens = [dict(a) for a in added_tokens]
    for a in added_tokens:
        if a["content"] in model["vocab"]:
            a["id"] = model["vocab"][a["content"]]
        else:
            a["id"] = nxt
            nxt += 1
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": list(added_tokens),
            "normalizer": normalizer, "pre_tokenizer": pre, "post_processor": post, "decoder": decoder, "model": model}

BL_MERGES = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "o n", "Ġ w", "o r", "l d", "Ġw or", "Ġwor ld", "l l",
             "e ll", "h ell", "hell o", "Ġ hello", "' s", "Ġ 1", "2 3", "ð Ł", "Ġ ðŁ", "Ã ©"]
BL_PRE = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
BL_DEC = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
SP_MERGES = ["▁ t", "h e", "▁t he", "▁ a", "i n", "▁ w", "o r", "l d", "▁w or", "▁wor ld", "l l", "e ll", "H ell",
             "Hell o", "▁ Hello", "▁ H", "▁H e"]
SP_NORM = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                                               {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
SP_DEC = {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                                           {"type": "ByteFallback"}, {"type": "Fuse"},
                                           {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
TEMPLATE = {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "</s>", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]},
                               "</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}}
SP_ADDED = [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")]

TEXTS_EN = ["hello world", "Hello world", "the world's 123", " in  the   world ", "héllo 😀 wörld", "",
            "<s>hello</s> world<s>", "tab\tnew\nline"]

CASES = []
def case(name, d, texts=TEXTS_EN):
    CASES.append((name, d, texts))

# --- model options ---
case("bytelevel", doc(bytelevel_model(BL_MERGES), pre=BL_PRE, decoder=BL_DEC))
case("bytelevel_pair_merges", doc(bytelevel_model(BL_MERGES, pair_form=True), pre=BL_PRE, decoder=BL_DEC))
case("bytelevel_prefix_space", doc(bytelevel_model(BL_MERGES), pre=dict(BL_PRE, add_prefix_space=True), decoder=BL_DEC))
case("bytelevel_no_regex", doc(bytelevel_model(BL_MERGES), pre=dict(BL_PRE, use_regex=False), decoder=BL_DEC))
case("bytelevel_ignore_merges", doc(bytelevel_model(BL_MERGES + ["Ġwor d"], ignore_merges=True), pre=BL_PRE, decoder=BL_DEC),
     ["hello world", "Ġword word", " hello"])
case("bytelevel_added", doc(bytelevel_model(BL_MERGES),
                            added_tokens=[added(300, "<|im_start|>"), added(301, "<|im_end|>"),
                                          added(302, "<mask>", special=False, lstrip=True, rstrip=True),
                                          added(303, "ell", special=False, single_word=True),
                                          added(304, "wor", special=False, normalized=True)],
                            pre=BL_PRE, decoder=BL_DEC),
     ["<|im_start|>hello<|im_end|>", "a <mask> b", "a<mask>b", "ell hello ell,ell", "world wor", "<|im_start|><|im_end|>",
      " <mask>  <mask> "])
case("added_rstrip_overlap", doc(bytelevel_model(BL_MERGES),
                                added_tokens=[added(0, "<a>", special=False, rstrip=True), added(0, " x", special=False),
                                              added(0, "<b>", special=False, lstrip=True)],
                                pre=BL_PRE, decoder=BL_DEC),
     ["<a> x", "<a>  xy", "<a>x", "<a> <b>", "q  <b>", "<a>   <b> x"])
case("sp", doc(sp_model(SP_MERGES), SP_ADDED, normalizer=SP_NORM, post=TEMPLATE, decoder=SP_DEC))
case("sp_no_fuse_unk", doc(sp_model(SP_MERGES, fuse_unk=False, byte_fallback=False), SP_ADDED, normalizer=SP_NORM,
                           decoder=SP_DEC), ["hello ZZZ world", "QQ hello", "日本"])
case("sp_fuse_unk", doc(sp_model(SP_MERGES, byte_fallback=False), SP_ADDED, normalizer=SP_NORM, decoder=SP_DEC),
     ["hello ZZZ world", "QQ hello", "日本"])
case("sp_no_unk", doc(sp_model(SP_MERGES, byte_fallback=False, unk_token=None), SP_ADDED, normalizer=SP_NORM,
                      decoder=SP_DEC), ["hello ZZZ world", "日本"])
case("suffix_prefix", doc(sp_model(["h ##e", "##l ##l", "he ##ll", "hell ##o</w>", "w ##o", "wo ##r", "##l ##d</w>"],
                                  extra=["##e", "##l", "##o", "##r", "##d", "##o</w>", "##d</w>", "##r</w>", "e</w>"],
                                  continuing_subword_prefix="##", end_of_word_suffix="</w>", byte_fallback=False),
                          SP_ADDED, pre={"type": "WhitespaceSplit"}), ["hello world", "he wor e"])
# --- normalizers ---
case("norm_lower_nfkc_strip", doc(sp_model(SP_MERGES), SP_ADDED, normalizer={"type": "Sequence", "normalizers": [
    {"type": "NFKC"}, {"type": "Lowercase"}, {"type": "Strip", "strip_left": True, "strip_right": True},
    {"type": "Replace", "pattern": {"Regex": " +"}, "content": "▁"}, {"type": "Prepend", "prepend": "▁"}]}, decoder=SP_DEC),
     ["  HELLO   World  ", "ＨＥＬＬＯ ｗｏｒｌｄ", "Ⅻ ﬁ", "e\u0301"])
case("norm_nfd", doc(sp_model(SP_MERGES), SP_ADDED, normalizer={"type": "NFD"}, pre={"type": "Whitespace"}), ["héllo wörld"])
case("norm_nfc", doc(sp_model(SP_MERGES, extra=["é"]), SP_ADDED, normalizer={"type": "NFC"}, pre={"type": "Whitespace"}),
     ["he\u0301llo", "héllo"])
case("norm_nfkd", doc(sp_model(SP_MERGES), SP_ADDED, normalizer={"type": "NFKD"}, pre={"type": "Whitespace"}), ["ﬁ héllo"])
case("added_normalized", doc(sp_model(SP_MERGES), SP_ADDED + [added(len(sp_model(SP_MERGES)["vocab"]), "WORLD", special=False, normalized=True)],
                             normalizer={"type": "Lowercase"}, pre={"type": "Whitespace"}), ["hello world WORLD World"])
# --- pre-tokenizers ---
for bh in ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]:
    for inv in [False, True]:
        case("split_%s_%s" % (bh, inv), doc(sp_model(SP_MERGES), SP_ADDED, pre={"type": "Split", "pattern": {"String": "l"},
                                                                              "behavior": bh, "invert": inv}),
             ["hello world", "llama ll l"])
case("split_regex", doc(sp_model(SP_MERGES), SP_ADDED, pre={"type": "Split", "pattern": {"Regex": "\\s+|[aeiou]"},
                                                             "behavior": "Isolated", "invert": False}), ["hello   world"])
case("digits", doc(sp_model(SP_MERGES, extra="0123456789"), SP_ADDED, pre={"type": "Digits", "individual_digits": False}), ["ab123cd45"])
case("digits_individual", doc(sp_model(SP_MERGES, extra="0123456789"), SP_ADDED, pre={"type": "Digits", "individual_digits": True}), ["ab123cd45"])
case("punctuation", doc(sp_model(SP_MERGES), SP_ADDED, pre={"type": "Punctuation", "behavior": "Isolated"}), ["hello, world!!"])
case("whitespace", doc(sp_model(SP_MERGES), SP_ADDED, pre={"type": "Whitespace"}), ["hello,  world!! the"])
case("metaspace_always", doc(sp_model(SP_MERGES), SP_ADDED, pre={"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
                             decoder={"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}),
     ["hello world", " the world", "<s>hello</s>the"])
case("metaspace_first", doc(sp_model(SP_MERGES), SP_ADDED, pre={"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False},
                            decoder={"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}),
     ["hello world", "<s>hello</s>the", "the<s>hello"])
case("metaspace_never", doc(sp_model(SP_MERGES), SP_ADDED, pre={"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": True},
                            decoder={"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": True}),
     ["hello world", " the world"])
# --- post-processors ---
case("roberta", doc(sp_model(SP_MERGES), SP_ADDED, normalizer=SP_NORM, post={"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 1],
                                                                           "trim_offsets": True, "add_prefix_space": True}, decoder=SP_DEC), ["hello world"])
case("bert", doc(sp_model(SP_MERGES), SP_ADDED, normalizer=SP_NORM, post={"type": "BertProcessing", "sep": ["</s>", 2], "cls": ["<s>", 1]}, decoder=SP_DEC), ["hello world"])
case("post_sequence", doc(bytelevel_model(BL_MERGES), [added(len(bytelevel_model(BL_MERGES)["vocab"]), "<s>")], pre=BL_PRE, decoder=BL_DEC, post={
    "type": "Sequence", "processors": [{"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
                                       dict(TEMPLATE, single=TEMPLATE["single"][:2], special_tokens={"<s>": {"id": "<s>", "ids": [len(bytelevel_model(BL_MERGES)["vocab"])], "tokens": ["<s>"]}})]}),
     ["hello world"])
# --- decoders ---
case("decoder_null", doc(sp_model(SP_MERGES), SP_ADDED, normalizer=SP_NORM), ["hello world"])
case("decoder_strip_both", doc(sp_model(SP_MERGES), SP_ADDED, normalizer=SP_NORM, decoder={"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 1}]}),
     ["hello world", " the  world "])
case("decoder_bytefallback_invalid", doc(sp_model(SP_MERGES), SP_ADDED, normalizer=SP_NORM, decoder=SP_DEC), ["é😀 x"])

def oracle(d, texts):
    js = r"""
const {Tokenizer}=require(process.argv[1]); const fs=require('fs');
(async()=>{ const inp=JSON.parse(fs.readFileSync(0,'utf8'));
  const t=Tokenizer.fromString(JSON.stringify(inp.doc)); const out=[];
  for (const s of inp.texts) { const e=await t.encode(s,null,{addSpecialTokens:false}); const e2=await t.encode(s,null,{addSpecialTokens:true});
    out.push({ids:Array.from(e.getIds()), ids_sp:Array.from(e2.getIds()), dec:await t.decode(Array.from(e.getIds()),false),
              dec_skip:await t.decode(Array.from(e2.getIds()),true)}); }
  console.log(JSON.stringify(out)); })();"""
    r = subprocess.run(["node", "-e", js, NODE_TOK], input=json.dumps({"doc": d, "texts": texts}), capture_output=True, text=True)
    if r.returncode: sys.exit(r.stderr[-2000:])
    return json.loads(r.stdout)

def cstr(s):
    return json.dumps(s, ensure_ascii=False)  # JSON escapes are valid C++ escapes for these strings

out = ["// Generated by tests/model/gen_hf_cases.py from Hugging Face's tokenizers 0.23.2 (node): do not edit.",
       "// {name, tokenizer.json, text, {ids}, {ids with add_special}, decode(ids),",
       "//  decode(ids with add_special, skip_special)}; struct Case is the includer's."]
rows = []
for name, d, texts in CASES:
    res = oracle(d, texts)
    out.append("static const char* const kJson_%s = R\"json(%s)json\";" % (name, json.dumps(d, ensure_ascii=False)))
    for t, r in zip(texts, res):
        rows.append("    {%s, kJson_%s, %s, {%s}, {%s}, %s, %s}," % (cstr(name), name, cstr(t), ", ".join(map(str, r["ids"])),
                    ", ".join(map(str, r["ids_sp"])), cstr(r["dec"]), cstr(r["dec_skip"])))
out.append("const Case kCases[] = {")
out += rows
out.append("};")
open("tests/model/test_hf_tokenizer_cases.inc", "w").write("\n".join(out) + "\n")
print(len(CASES), "tokenizers,", len(rows), "cases")
