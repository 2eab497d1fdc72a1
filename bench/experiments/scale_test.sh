#!/usr/bin/env bash
# Local scale-out (issue 19): three `shrike serve` replicas on loopback behind HAProxy, scraped by
# Prometheus, driven by `shrike loadtest` through the proxy. Bounded: about 2 minutes.
#   bench/experiments/scale_test.sh [build/shrike] [stories260K.gguf]
# 1. goodput through the proxy with 1 replica, then with 3 (least connections), same closed loop;
# 2. one replica stopped mid-run with SIGTERM (it drains: /health 503, HAProxy's health check
#    takes it out, requests it refuses while draining are retried elsewhere): no request lost;
# 3. one replica killed mid-run with SIGKILL (a crash): only requests it had already accepted
#    (their stream had started) may fail; every other request is served by the others;
# 4. Prometheus has scraped every replica: the protocol gauges (vllm:num_requests_running, ...)
#    and shrike's own, one series per replica (its HTTP API, /api/v1/query).
# Each replica gets 1 compute thread. This machine has 2 cores: 3 replicas + HAProxy + the load
# generator oversubscribe them, so "3 replicas" cannot mean 3x the compute of "1 replica" here
# (see docs/RESULTS.md). Installs haproxy and prometheus (Debian) when missing. Prints a Markdown
# table; reports and logs go to $OUT (default /tmp/shrike-scale-test). Exits 1 when a check fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
shrike=$(realpath "${1:-build/shrike}")
model=$(realpath "${2:-../shared/reference/stories260K/stories260K.gguf}")
out=${OUT:-/tmp/shrike-scale-test}
duration=${DURATION:-15}
concurrency=${CONCURRENCY:-12}
rm -rf "$out"
mkdir -p "$out"
[ -x "$shrike" ] || { echo "no shrike binary at $shrike (build it: scripts/build.sh)" >&2; exit 2; }
[ -f "$model" ] || { echo "no model at $model (../shared absent?)" >&2; exit 2; }

missing=()
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
command -v curl >/dev/null 2>&1 || missing+=(curl)
if ((${#missing[@]})); then
  echo "scale_test: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
haproxy_bin=$(command -v haproxy || echo /usr/sbin/haproxy)

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

wait_ready() {  # url: until /health answers 200 (30 s)
  for _ in $(seq 1 300); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$1/health" || true)" = 200 ] && return 0
    sleep 0.1
  done
  echo "$1 never became ready" >&2
  return 1
}

declare -A replica_pid replica_port
start_replica() {  # index [port]
  local port=${2:-$(free_port)}
  "$shrike" serve "$model" --model-name stories --host 127.0.0.1 --port "$port" --threads 1 \
    --metrics-compat vllm --drain-timeout 30 --max-seqs 16 >"$out/replica$1.log" 2>&1 &
  replica_pid[$1]=$!
  replica_port[$1]=$port
  pids+=($!)
}

for i in 1 2 3; do start_replica "$i"; done
for i in 1 2 3; do wait_ready "http://127.0.0.1:${replica_port[$i]}"; done

# HAProxy: least connections over the replicas in use; a replica leaves the pool when its /health
# (readiness) fails twice 200 ms apart. Requests are buffered so that a replica's refusal (503
# while draining, a closed port) is retried on another one; a response that has started is never
# retried (those requests were accepted). A second frontend shows prefix affinity: a consistent
# hash of the prompt's first 64 bytes, bounded to 1.5x the mean load (hash-balance-factor).
haproxy_cfg() {  # n_replicas
  cat <<CFG
global
  maxconn 1024
defaults
  mode http
  timeout connect 2s
  timeout client 120s
  timeout server 120s
  retries 3
  option redispatch 1
  retry-on conn-failure empty-response 503
  option http-buffer-request
frontend least
  bind 127.0.0.1:$proxy_port
  default_backend replicas
frontend prefix
  bind 127.0.0.1:$prefix_port
  default_backend prefix_affinity
backend replicas
  balance leastconn
  option httpchk GET /health
  default-server check inter 200ms fall 2 rise 2
$(for i in $(seq 1 "$1"); do echo "  server r$i 127.0.0.1:${replica_port[$i]}"; done)
backend prefix_affinity
  balance hash req.body,json_query('$.prompt'),bytes(0,64)
  hash-type consistent
  hash-balance-factor 150
  option httpchk GET /health
  default-server check inter 200ms fall 2 rise 2
$(for i in $(seq 1 "$1"); do echo "  server r$i 127.0.0.1:${replica_port[$i]}"; done)
CFG
}
proxy_port=$(free_port)
prefix_port=$(free_port)
haproxy_pid=""
start_proxy() {  # n_replicas
  if [ -n "$haproxy_pid" ]; then kill "$haproxy_pid"; wait "$haproxy_pid" 2>/dev/null || true; fi
  haproxy_cfg "$1" >"$out/haproxy.cfg"
  "$haproxy_bin" -c -q -f "$out/haproxy.cfg"
  "$haproxy_bin" -db -f "$out/haproxy.cfg" >"$out/haproxy.log" 2>&1 &
  haproxy_pid=$!
  pids+=($!)
  wait_ready "http://127.0.0.1:$proxy_port"
  sleep 0.5  # every server's first health check
}

# Prometheus scraping the three replicas every second.
prom_port=$(free_port)
cat >"$out/prometheus.yml" <<CFG
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: shrike
    static_configs:
      - targets: [$(for i in 1 2 3; do printf "'127.0.0.1:%s'," "${replica_port[$i]}"; done | sed 's/,$//')]
CFG
prometheus --config.file="$out/prometheus.yml" --storage.tsdb.path="$out/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" >"$out/prometheus.log" 2>&1 &
pids+=($!)

load() {  # name port [extra loadtest args]
  local name=$1 port=$2
  shift 2
  "$shrike" loadtest --url "http://127.0.0.1:$port" --concurrency "$concurrency" \
    --duration "$duration" --max-requests 100000 --input-tokens 24 --output-tokens 48 \
    --seed 19 --timeout 60 --slo ttft=1000,e2e=4000 --out-json "$out/$name.json" "$@" \
    >"$out/$name.md" 2>&1
}

echo "scale_test: 1 replica through the proxy ($duration s, concurrency $concurrency)"
start_proxy 1
load one "$proxy_port"
echo "scale_test: 3 replicas through the proxy"
start_proxy 3
load three "$proxy_port"

echo "scale_test: 3 replicas, replica 2 stopped (SIGTERM, drain) mid-run"
load drain "$proxy_port" &
load_pid=$!
sleep $((duration / 3))
kill -TERM "${replica_pid[2]}"
wait "$load_pid"
wait "${replica_pid[2]}" || true
echo "scale_test: replica 2 restarted; replica 3 killed (SIGKILL) mid-run"
start_replica 2 "${replica_port[2]}"  # the same port: Prometheus scrapes it again
wait_ready "http://127.0.0.1:${replica_port[2]}"
start_proxy 3
load crash "$proxy_port" &
load_pid=$!
sleep $((duration / 3))
kill -KILL "${replica_pid[3]}"
wait "$load_pid"

echo "scale_test: prefix affinity frontend (consistent hash of the prompt's first 64 bytes)"
load affinity "$prefix_port"

sleep 2  # a last scrape
query() {
  curl -s --get "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1"
}
query 'vllm:num_requests_running' >"$out/q_running.json"
query 'vllm:kv_cache_usage_perc' >"$out/q_usage.json"
query 'max by (instance) (max_over_time(vllm:num_requests_running[10m]))' >"$out/q_running_max.json"
query 'max by (instance) (max_over_time(shrike_generation_tokens_total[10m]))' >"$out/q_tokens.json"

python3 - "$out" "${replica_port[1]}" "${replica_port[2]}" "${replica_port[3]}" <<'PY'
import json, os, sys
out = sys.argv[1]
ports = sys.argv[2:5]
def summary(name):
    return json.load(open(os.path.join(out, name + ".json")))["summary"]
def records(name):
    return json.load(open(os.path.join(out, name + ".json")))["requests"]
failures = []
print("| run | replicas | sent | completed | failed | req/s | output tok/s | goodput/s | e2e P50 ms | e2e P99 ms | TTFT P99 ms |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
labels = {"one": ("1 replica", "1"), "three": ("3 replicas", "3"),
          "drain": ("3, one SIGTERM mid-run", "3 -> 2"), "crash": ("3, one SIGKILL mid-run", "3 -> 2"),
          "affinity": ("prefix affinity, 2 left", "2")}
for name, (label, n) in labels.items():
    s = summary(name)
    print(f"| {label} | {n} | {s['sent']} | {s['completed']} | {s['failed']} | {s['requests_per_s']:.1f} | "
          f"{s['output_tokens_per_s']:.0f} | {s['goodput_per_s']:.1f} | {s['e2e']['p50_ms']:.0f} | "
          f"{s['e2e']['p99_ms']:.0f} | {s['ttft']['p99_ms']:.0f} |")
one, three = summary("one"), summary("three")
ratio = three["goodput_per_s"] / one["goodput_per_s"] if one["goodput_per_s"] > 0 else float("inf")
print(f"\ngoodput 3 replicas / 1 replica: {ratio:.2f}x; "
      f"output tokens/s {three['output_tokens_per_s'] / max(one['output_tokens_per_s'], 1e-9):.2f}x")
if ratio <= 1.0:
    failures.append(f"goodput did not grow with replicas ({ratio:.2f}x)")
for name in ("one", "three", "affinity"):
    if summary(name)["failed"]:
        failures.append(f"{name}: {summary(name)['failed']} requests failed")
# SIGTERM: the replica drains, so nothing is lost.
d = summary("drain")
if d["failed"]:
    failures.append(f"drain: {d['failed']} requests lost")
print(f"SIGTERM mid-run: {d['failed']} of {d['sent']} requests failed")
# SIGKILL: only requests the killed replica had accepted (its 200 and stream had begun) may fail;
# a refused connection is retried by HAProxy on another replica.
crash = [r for r in records("crash") if r["outcome"] != "completed"]
unaccepted = [r for r in crash if r.get("http_status") != 200]
print(f"SIGKILL mid-run: {len(crash)} of {summary('crash')['sent']} requests failed, "
      f"{len(crash) - len(unaccepted)} of them mid-stream (accepted by the killed replica: "
      f"{', '.join(str(r['output_tokens']) for r in crash if r.get('http_status') == 200)} tokens "
      f"received), {len(unaccepted)} before the replica accepted them")
for r in unaccepted[:5]:
    failures.append(f"crash: request {r['id']} lost before it was accepted: {r.get('error')}")
if len(crash) > 16:
    failures.append(f"crash: {len(crash)} failures, more than the killed replica's 16 running slots")
# Prometheus: one series per replica for the protocol gauge, tokens from all three.
def result(q):
    j = json.load(open(os.path.join(out, q)))
    if j.get("status") != "success":
        failures.append(f"prometheus {q}: {j}")
        return []
    return j["data"]["result"]
running = result("q_running.json")
instances = sorted({r["metric"]["instance"] for r in result("q_tokens.json")})
peaks = {r["metric"]["instance"]: float(r["value"][1]) for r in result("q_running_max.json")}
tokens = {r["metric"]["instance"]: float(r["value"][1]) for r in result("q_tokens.json")}
print(f"Prometheus (its HTTP API): vllm:num_requests_running now has {len(running)} series (the "
      f"replicas alive); over the run, series from {len(instances)} replicas: " +
      "; ".join(f"{i}: peak vllm:num_requests_running {peaks.get(i, 0):.0f}, "
                f"shrike_generation_tokens_total {tokens[i]:.0f}" for i in instances))
if len(instances) != 3:
    failures.append(f"prometheus saw {len(instances)} instances, not 3")
if len(peaks) != 3 or min(peaks.values()) < 1:
    failures.append(f"prometheus: not every replica was seen running requests: {peaks}")
if not running or any(r["metric"].get("model_name") != "stories" for r in running):
    failures.append("prometheus: no vllm:num_requests_running{model_name=\"stories\"} series")
if failures:
    print("\nFAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("\nscale_test: all checks passed")
PY
