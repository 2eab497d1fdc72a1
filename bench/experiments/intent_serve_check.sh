#!/bin/bash
# The intent model served by default (issue 15): serves MODEL, posts every utterance of TEST.jsonl
# to POST /v1/intent, and counts the answers that name an intent of the label set (the intents of
# train.jsonl beside TEST.jsonl), the intent accuracy, and model calls / tokens per answer.
# usage: bench/experiments/intent_serve_check.sh SHRIKE MODEL TEST.jsonl PORT [serve options...]
set -euo pipefail
B=$1 M=$2 T=$3 PORT=$4
shift 4
log=$(mktemp)
"$B" serve "$M" --port "$PORT" --threads 2 "$@" >"$log" 2>&1 &
sp=$!
trap 'kill $sp 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 100); do curl -s "localhost:$PORT/health" | grep -q ok && break; sleep 0.2; done
python3 - "$T" "$PORT" "$(dirname "$T")/train.jsonl" <<'PY'
import json, sys, urllib.request
test, port, train = sys.argv[1:4]
labels = {json.loads(l)["intent"] for l in open(train) if l.strip()}
n = ok = steps = toks = correct = 0
for line in open(test):
    if not line.strip():
        continue
    d = json.loads(line)
    n += 1
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/intent",
                                 json.dumps({"text": d["text"]}).encode(),
                                 {"Content-Type": "application/json"})
    try:
        r = json.loads(urllib.request.urlopen(req).read())
    except Exception:
        continue
    ok += r["intent"] in labels and isinstance(r["slots"], dict)
    correct += r["intent"] == d["intent"]
    steps += r["timing"]["model_steps"]
    toks += r["usage"]["completion_tokens"]
print(f"{n} answers, {ok} parse and name a label ({100 * ok / n:.1f}%), intent accuracy "
      f"{correct / n:.4f}, {steps / n:.2f} model calls and {toks / n:.2f} tokens per answer")
PY
