#!/usr/bin/env python3
"""Writes the committed seed corpora fuzz/corpus/TARGET/ from tiny hand-made inputs.

Usage: fuzz/make_seeds.py SHRIKE_BINARY   (the GGUF seeds are `shrike synth` models of 1 layer)
Seeds only need to reach deep into each parser; libFuzzer mutates them from there. Inputs made
of several files join them with fuzz_input.h's separator line."""
import json
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.abspath(__file__))
SEP = b"\n=====\n"


def put(target, name, data):
    d = os.path.join(ROOT, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_seeds(shrike):
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in [
            ("f32_tied", ["--dim", "8", "--ffn", "16", "--type", "f32", "--tied"]),
            ("q8_0_gqa", ["--dim", "32", "--ffn", "32", "--kv-heads", "1", "--type", "q8_0", "--tied"]),
            ("q4_0", ["--dim", "32", "--ffn", "32", "--type", "q4_0", "--tied"]),
        ]:
            out = os.path.join(tmp, name + ".gguf")
            subprocess.run([shrike, "synth", "--layers", "1", "--heads", "2", "--vocab", "260",
                            "--context", "16", "-o", out] + args, check=True,
                           stdout=subprocess.DEVNULL)
            put("gguf", name, open(out, "rb").read())  # no .gguf: .gitignore drops those
    # A header with one key of every type (arrays of arrays included) and no tensors.
    kv = [
        ("a.u8", 0, struct.pack("<B", 7)), ("a.i8", 1, struct.pack("<b", -7)),
        ("a.u16", 2, struct.pack("<H", 7)), ("a.i16", 3, struct.pack("<h", -7)),
        ("a.u32", 4, struct.pack("<I", 7)), ("a.i32", 5, struct.pack("<i", -7)),
        ("a.f32", 6, struct.pack("<f", 0.5)), ("a.bool", 7, struct.pack("<B", 1)),
        ("a.str", 8, gguf_string("hi")), ("a.u64", 10, struct.pack("<Q", 7)),
        ("a.i64", 11, struct.pack("<q", -7)), ("a.f64", 12, struct.pack("<d", 0.25)),
        ("a.arr", 9, struct.pack("<IQ", 8, 2) + gguf_string("x") + gguf_string("y")),
        ("a.nested", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 5, 1) + struct.pack("<i", 3)),
    ]
    body = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv))
    for key, t, v in kv:
        body += gguf_string(key) + struct.pack("<I", t) + v
    put("gguf", "all_types", body)


def llama2c_seeds():
    # dim 8, hidden 16, 1 layer, 2 heads, 2 kv heads, vocab 4, seq 4; tied and untied.
    dim, hid, L, H, KV, V, T = 8, 16, 1, 2, 2, 4, 4
    head = dim // H
    for name, vocab in [("tied", V), ("untied", -V)]:
        floats = V * dim + L * dim + L * dim * dim + 2 * L * (KV * head) * dim + L * dim * dim \
            + L * dim + 3 * L * hid * dim + dim + T * head + (0 if vocab > 0 else V * dim)
        data = struct.pack("<7i", dim, hid, L, H, KV, vocab, T)
        data += b"".join(struct.pack("<f", ((i * 37) % 17 - 8) / 16) for i in range(floats))
        put("llama2c", "model_" + name + ".bin", b"\x01" + data)
    tok = struct.pack("<I", 6)
    for i, piece in enumerate([b"<unk>", b"\n<s>\n", b"\n</s>\n", b" ", b"a", b" once"]):
        tok += struct.pack("<fI", -float(i), len(piece)) + piece
    put("llama2c", "tok.bin", b"\x00" + tok)


def safetensors_file(tensors, metadata=None):
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


def safetensors_seeds():
    f32 = struct.pack("<4f", 1, 2, 3, 4)
    one = safetensors_file([("w", "F32", [2, 2], f32), ("b", "BF16", [2], b"\x80\x3f\x00\x40"),
                            ("h", "F16", [1], b"\x00\x3c"), ("i", "I64", [1], struct.pack("<q", 5))],
                           {"format": "pt"})
    put("safetensors", "single.safetensors", one)
    index = json.dumps({"metadata": {"total_size": 24},
                        "weight_map": {"w": "model-00001-of-00001.safetensors",
                                       "b": "model-00001-of-00001.safetensors"}}).encode()
    put("safetensors", "sharded", index + SEP + one)


def hf_tokenizer_seeds():
    m = "\u2581"
    spm = {
        "version": "1.0", "added_tokens": [
            {"id": 0, "content": "<unk>", "special": True}, {"id": 1, "content": "<s>", "special": True},
            {"id": 2, "content": "</s>", "special": True}],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": m}, {"type": "Replace", "pattern": {"String": " "}, "content": m}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing", "single": [
            {"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": True, "byte_fallback": True,
                  "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "<0x48>": 4, m: 5, "H": 6,
                            "e": 7, "l": 8, "o": 9, m + "H": 10, "ll": 11, "He": 12},
                  "merges": [m + " H", "l l", "H e"]},
        "decoder": None}
    cfg = {"bos_token": "<s>", "eos_token": {"content": "</s>", "special": True}, "add_bos_token": True,
           "add_eos_token": False, "chat_template": "{{ '<|im_start|>' }}"}
    put("hf_tokenizer", "spm", json.dumps(spm).encode() + SEP + json.dumps(cfg).encode())
    # GPT-2 style byte-level BPE: every byte's printable form, a few merges.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    vocab = {chr(c): i for i, c in enumerate(cs)}
    merges = ["H e", "l l", "\u0120 w", "o r"]
    for mg in merges:
        vocab[mg.replace(" ", "")] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    bpe = {"version": "1.0",
           "added_tokens": [{"id": vocab["<|endoftext|>"], "content": "<|endoftext|>", "special": True}],
           "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                             "use_regex": True},
           "post_processor": {"type": "ByteLevel", "trim_offsets": False},
           "model": {"type": "BPE", "byte_fallback": False, "vocab": vocab, "merges": merges},
           "decoder": {"type": "ByteLevel"}}
    put("hf_tokenizer", "bytelevel", json.dumps(bpe))
    wp = {"version": "1.0",
          "added_tokens": [{"id": i, "content": t, "special": True}
                           for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]"])],
          "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                         "strip_accents": None, "lowercase": True},
          "pre_tokenizer": {"type": "BertPreTokenizer"},
          "post_processor": {"type": "TemplateProcessing", "single": [
              {"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
              {"SpecialToken": {"id": "[SEP]", "type_id": 0}}], "pair": [], "special_tokens": {}},
          "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                    "max_input_chars_per_word": 100,
                    "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "hello": 4, "world": 5,
                              "##s": 6, ",": 7, "!": 8, "1": 9}}}
    put("hf_tokenizer", "wordpiece", json.dumps(wp) + SEP.decode() + json.dumps(
        {"cls_token": "[CLS]", "sep_token": "[SEP]"}))


def chat_template_seeds():
    msgs = "\x00You are terse.\n\x01Hi <|im_end|>\n\x02Hello.\n\x01\xe4\xbd\xa0\xe5\xa5\xbd"
    for name, tmpl in [
        ("chatml", "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"),
        ("llama3", "<|start_header_id|>{{ role }}<|end_header_id|>\n\n{{ content }}<|eot_id|>"),
        ("llama2", "[INST] <<SYS>>\n{{ system }}\n<</SYS>>\n\n{{ user }} [/INST]"),
        ("gemma", "<start_of_turn>user\n{{ content }}<end_of_turn>\n"),
        ("deepseek3", "<\uff5cUser\uff5c>{{ content }}<\uff5cAssistant\uff5c>"),
        ("plain", ""),
    ]:
        put("chat_template", name, tmpl.encode() + SEP + msgs.encode("latin-1"))


def request_seeds():
    seeds = {
        "completion": {"model": "m", "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0.7,
                       "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": 3, "stop": ["\n", "."],
                       "logprobs": 2, "presence_penalty": 0.5, "frequency_penalty": 0.1,
                       "repetition_penalty": 1.1, "stream": True, "stream_options": {"include_usage": True},
                       "ignore_eos": False, "timeout": 1.5},
        "tokens": {"prompt": [1, 2, 3], "max_tokens": 2, "n": 1, "echo": False},
        "chat": {"model": "m", "messages": [{"role": "system", "content": "Be brief."},
                                            {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                                            {"role": "assistant", "content": "Hello"},
                                            {"role": "developer", "content": "x"}],
                 "max_completion_tokens": 4, "logprobs": True, "top_logprobs": 3, "stop": "END"},
        "json_schema": {"messages": [{"role": "user", "content": "intent?"}],
                        "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {
                            "type": "object", "properties": {"intent": {"enum": ["a", "b"]}},
                            "required": ["intent"]}}}},
        "json_object": {"prompt": "x", "response_format": {"type": "json_object"}, "jump_forward": False},
        "guided": {"prompt": "x", "guided_choice": ["yes", "no"]},
        "guided_regex": {"prompt": "x", "guided_regex": "[a-z]{1,3}\\d?"},
        "guided_json": {"prompt": "x", "guided_json": "{\"type\": \"integer\"}"},
    }
    for name, body in seeds.items():
        put("request", name, json.dumps(body))
    put("request", "deep", "[" * 70 + "]" * 70)


def trace_seeds():
    put("trace", "azure.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n")
    put("trace", "mooncake.jsonl", '{"timestamp": 0, "input_length": 6755, "output_length": 500, '
        '"hash_ids": [46, 47, 48]}\n{"timestamp": 27, "input_length": 7319, "output_length": 490, '
        '"hash_ids": [0, 1, 2]}\n')
    put("trace", "own.jsonl", '{"timestamp": 0.5, "input_tokens": 10, "output_tokens": 3}\n\n'
        '{"timestamp": 0.25, "input_tokens": 1, "output_tokens": 1, "hash_ids": [7]}\n')


def task_data_seeds():
    put("task_data", "examples", b"\x00" + '{"text": "book a table for 2", "intent": "book", '
        '"slots": {"people": "2"}, "lang": "en"}\n\n{"text": "\u4f60\u597d", "intent": "greet"}\n'.encode())
    put("task_data", "banking77", b"\x01" + b'text,category\r\nwhere is my card?,card_arrival\r\n'
        b'"How do I know, if my ""card""\nwill arrive?",card_arrival\r\n')
    put("task_data", "clinc150", b"\x02" + json.dumps({
        "train": [["say hi in french", "translate"]], "val": [["bye", "translate"]],
        "oos_train": [["how tall", "oos"]], "oos_val": [["sing", "oos"]]}).encode())
    put("task_data", "snips", b"\x03" + json.dumps({"GetWeather": [{"data": [
        {"text": "weather in "}, {"text": "K\u00f6ln", "entity": "city"}]}]}).encode())
    put("task_data", "nlupp", b"\x04" + json.dumps([
        {"text": "Change my card on 5 March", "intents": ["change", "card"],
         "slots": {"date": {"text": "5 March", "span": [18, 25]}}},
        {"text": "gym?", "intents": ["gym"]}]).encode())
    put("task_data", "hint3", b"\x05" + b"sentence,label,\r\nnot recieved my product,ORDER_STATUS,\r\n")
    put("task_data", "bitext", b"\x06" + b"context,role,instruction,intent,entity_type,entity_value,"
        b"start_offset,end_offset,category,tags,response\n"
        b"c,r,cancel purchase 00123842 pls,cancel_order,order_id,123842,16,24,ORDER,BLQZ,\"Sure.\"\n"
        b"c,r,talk to a human,contact_human_agent,,,,,CONTACT,B,ok\n")
    put("task_data", "xsid", b"\x07" + "# id = 1\n# text = \u4eca\u5929\u4f1a\u4e0b\u96e8\u5417\n"
        "# intent = weather/find\n1\t\u4eca\u5929\tweather/find\tB-datetime\n"
        "2\t\u4f1a\u4e0b\u96e8\u5417\tweather/find\tO\n".encode())
    put("task_data", "answer", b"\x08" + b'noise {"intent":"book","slots":{"people":"2"}} {"x')
    put("task_data", "recall", b"\x09" + b"The key is 42. filler words here. What was the key? 42")


def framer_seeds():
    # The first byte is where the stream is cut in two.
    put("framer", "pipelined", b"\x10GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
        b"POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
    put("framer", "chunked", b"\x30POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
        b"Expect: 100-continue\r\n\r\n3;e=1\r\nabc\r\n0\r\nT: v\r\n\r\nGET / HTTP/1.1\r\n\r\n")
    put("framer", "malformed", b"\x05POST / HTTP/1.1\r\nContent-Length : 3\r\n\r\nabc")


def json_schema_seeds():
    seeds = {
        "object": {"type": "object", "properties": {"intent": {"enum": ["a", "b"]},
                   "n": {"type": "integer"}, "x": {"type": "number"}, "ok": {"type": "boolean"},
                   "none": {"type": "null"}}, "required": ["intent"], "additionalProperties": False},
        "defs": {"$defs": {"s": {"type": "string", "pattern": "[a-z]+\\d{0,2}"}},
                 "type": "array", "items": {"$ref": "#/$defs/s"}, "minItems": 1, "maxItems": 3},
        "anyof": {"anyOf": [{"type": "string", "minLength": 1, "maxLength": 4}, {"const": 3},
                            {"type": ["integer", "null"]}], "title": "t"},
        "any": {"type": "object"},
        "allof": {"allOf": [{"type": "object", "properties": {"a": {}}}]},
        "formats": {"type": "object", "properties": {
            "d": {"type": "string", "format": "date-time"}, "e": {"type": "string", "format": "email",
                                                               "maxLength": 20},
            "h": {"type": "string", "format": "hostname", "pattern": "[a-z.]+"},
            "i": {"type": "string", "format": "ipv6"}, "p": {"type": "string", "format": "duration"}}},
        "numbers": {"type": "array", "items": {"anyOf": [
            {"type": "number", "exclusiveMinimum": 0, "maximum": 99.5, "multipleOf": 0.25},
            {"type": "integer", "minimum": -40, "maximum": 40, "multipleOf": 3},
            {"type": "number", "minimum": -1.5}]}},
    }
    for name, s in seeds.items():
        put("json_schema", name, json.dumps(s))
    put("json_schema", "true", "true")


def regex_seeds():
    for i, r in enumerate([r"[a-z]{1,3}\d?", r"(?:yes|no)+", r"(?<n>\x41|\u00e9)*.$", r"^[^\n\"]{0,8}$",
                           r"\w+@\w+\.(com|org)", "\u4f60\u597d|[\u4e00-\u9fff]{2}", r"a{2,}?b*?c+?",
                           r"\s\S\D\W[\]\-\\]"]):
        put("regex", "r%d" % i, r)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: fuzz/make_seeds.py SHRIKE_BINARY")
    gguf_seeds(sys.argv[1])
    llama2c_seeds()
    safetensors_seeds()
    hf_tokenizer_seeds()
    chat_template_seeds()
    request_seeds()
    trace_seeds()
    task_data_seeds()
    json_schema_seeds()
    regex_seeds()
    framer_seeds()
