#!/usr/bin/env python3
"""Server memory after many large, distinct constraint requests (issue: RSS must come back).

Starts `shrike serve MODEL`, sends WARMUP requests, reads the server's VmRSS, sends N requests
each with its own large JSON schema (many properties of several kinds, so each compiles to its
own automaton and fills its own mask cache), reads VmRSS again after the server is idle, and
prints both, their ratio and the memory regions whose resident size changed most. Usage:
  constraint_rss.py SHRIKE MODEL [N=1000] [PROPS=60] [CONCURRENCY=4] [extra serve args...]
Environment: LOG (the server's log, default /tmp/constraint_rss_server.log; set it per run when
two run at once), MAXTOK (max_tokens, default 24), SAME=1 (one schema for every request).
"""
import http.client
import os
import json
import random
import re
import subprocess
import sys
import threading
import time

LOG = os.environ.get("LOG", "/tmp/constraint_rss_server.log")


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) / 1024


def smaps(pid):
    regions = []
    cur = None
    for line in open(f"/proc/{pid}/smaps"):
        parts = line.split()
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            a, b = parts[0].split("-")
            cur = [int(a, 16), int(b, 16), parts[5] if len(parts) > 5 else "", 0]
            regions.append(cur)
        elif parts[0] == "Rss:":
            cur[3] = int(parts[1])
    return regions


def summarize(regions):
    out = {}
    for a, b, name, rss in regions:
        size = (b - a) >> 20
        key = name or ("anon %d MiB" % size if size >= 1 else "anon <1 MiB")
        out[key] = out.get(key, 0) + rss
    return out


def schema(rng, props):
    kinds = [
        lambda: {"type": "string", "maxLength": rng.randint(4, 40)},
        lambda: {"type": "integer", "minimum": rng.randint(-500, 0), "maximum": rng.randint(1, 5000)},
        lambda: {"enum": [f"v{rng.randint(0, 10**6)}" for _ in range(rng.randint(2, 8))]},
        lambda: {"type": "string", "pattern": "[A-Z]{2}-[0-9]{%d}" % rng.randint(2, 9)},
        lambda: {"type": "number"},
        lambda: {"type": "boolean"},
    ]
    p = {f"f{rng.randint(0, 10**9)}_{i}": rng.choice(kinds)() for i in range(props)}
    return {"type": "object", "properties": p, "required": list(p)[:3],
            "additionalProperties": False}


def post(port, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def main():
    shrike, model = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    props = int(sys.argv[4]) if len(sys.argv) > 4 else 60
    conc = int(sys.argv[5]) if len(sys.argv) > 5 else 4
    extra = sys.argv[6:]
    log = open(LOG, "w")
    srv = subprocess.Popen([shrike, "serve", model, "--port", "0", ] + extra,
                           stdout=log, stderr=subprocess.STDOUT)
    port = None
    for _ in range(600):
        time.sleep(0.1)
        m = re.search(r"127\.0\.0\.1:(\d+)", open(LOG).read())
        if m:
            port = int(m.group(1))
            break
    if not port:
        srv.kill()
        sys.exit("server did not start: see " + LOG)
    rng = random.Random(1)

    def run(count, seed):
        r = random.Random(seed)
        for _ in range(count):
            s = schema(random.Random(7) if os.environ.get("SAME") else r, props)
            status, data = post(port, {"prompt": "Answer:", "temperature": 1,
                                       "max_tokens": int(os.environ.get("MAXTOK", "24")),
                                       "response_format": {"type": "json_schema", "json_schema": {
                                           "name": "x", "schema": s}}})
            if status != 200:
                print("status", status, data[:200])

    run(20, 0)
    time.sleep(1)
    before = rss_mib(srv.pid)
    sm_before = summarize(smaps(srv.pid))
    t0 = time.time()
    threads = [threading.Thread(target=run, args=(n // conc, i + 1)) for i in range(conc)]
    for t in threads:
        t.start()
    peak = before
    while any(t.is_alive() for t in threads):
        peak = max(peak, rss_mib(srv.pid))
        time.sleep(0.2)
    elapsed = time.time() - t0
    time.sleep(2)
    after = rss_mib(srv.pid)
    sm_after = summarize(smaps(srv.pid))
    for k in sorted(set(sm_before) | set(sm_after), key=lambda k: -abs(sm_after.get(k, 0) - sm_before.get(k, 0)))[:8]:
        print(f"  {k:40s} {sm_before.get(k, 0) / 1024:8.1f} -> {sm_after.get(k, 0) / 1024:8.1f} MiB")
    print(f"requests {n} ({props} properties each, {conc} at a time) in {elapsed:.1f} s")
    print(f"VmRSS before {before:.1f} MiB  peak {peak:.1f} MiB  after {after:.1f} MiB  "
          f"after/before {after / before:.3f}")
    srv.terminate()
    srv.wait(30)


if __name__ == "__main__":
    main()
