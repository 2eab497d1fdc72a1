#!/usr/bin/env python3
"""Slow-client starvation: a well-behaved client's latency while hostile clients hold connections.

Starts `SHRIKE serve MODEL` on a free port, then alternates rounds: "unloaded" (the probe alone)
and "hostile N" (N connections that each sent half a request head and trickle one more header
byte per connection per second, reopening any the server closes, as a slowloris attacker does).
The probe sends 2-token completions one after another for ROUND_SECONDS (at least REQUESTS of
them), each on a new connection, each with a TIMEOUT-second limit (a timed-out request counts as
TIMEOUT in the percentiles; a round stops after 3 timeouts).
Prints one table row per round, then the median P50/P99 per condition and their ratio to unloaded.
Usage: slow_clients.py SHRIKE MODEL [--hostile 200,2000] [--rounds 3] [--requests 100]
       [--round-seconds 12] [--timeout 10] [--serve-arg=--threads=1 ...]
"""
import argparse
import http.client
import json
import multiprocessing
import os
import re
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HALF_HEAD = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
TRICKLE = b"X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n"


def start_server(shrike, model, extra):
    log = tempfile.NamedTemporaryFile(prefix="slow_clients_", suffix=".log", delete=False)
    proc = subprocess.Popen([shrike, "serve", model, "--port", "0"] + extra,
                            stdout=log, stderr=subprocess.STDOUT)
    for _ in range(600):
        text = open(log.name).read()
        m = re.search(r"listening on http://[^:]+:(\d+)", text)
        if m:
            return proc, int(m.group(1)), log.name
        if proc.poll() is not None:
            sys.exit("shrike serve exited:\n" + text)
        time.sleep(0.1)
    proc.kill()
    sys.exit("shrike serve did not start:\n" + open(log.name).read())


class Hostile:
    """N half-open requests kept alive by trickling header bytes; reopened when closed. Runs in
    its own process, so its loop over thousands of sockets never holds the probe's GIL."""

    def __init__(self, port, n):
        self.port, self.n = port, n
        self.stop = multiprocessing.Event()
        self.reopened = 0
        self.thread = multiprocessing.Process(target=self.run, daemon=True)

    def open_one(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", self.port))
        except BlockingIOError:
            pass
        return [s, 0]  # socket, bytes of HALF_HEAD + trickle sent

    def feed(self, slot):
        s, sent = slot
        data = HALF_HEAD if sent == 0 else TRICKLE[(sent - len(HALF_HEAD)) % len(TRICKLE):][:1]
        try:
            n = s.send(data)
            slot[1] += n
            return True
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False

    def run(self):
        slots = [self.open_one() for _ in range(self.n)]
        while not self.stop.is_set():
            t0 = time.monotonic()
            for i, slot in enumerate(slots):
                if self.stop.is_set():
                    break
                # A connection the server answered (408/503) or closed is replaced.
                closed = False
                try:
                    if slot[1] > 0 and slot[0].recv(4096, socket.MSG_DONTWAIT) is not None:
                        closed = True
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    closed = True
                if closed or not self.feed(slot):
                    slot[0].close()
                    slots[i] = self.open_one()
                    self.feed(slots[i])
                    self.reopened += 1
            self.stop.wait(max(0.0, 1.0 - (time.monotonic() - t0)))
        for s, _ in slots:
            s.close()

    def __enter__(self):
        self.thread.start()
        time.sleep(3)  # every connection opened and holding its half head
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def probe(port, n, timeout, seconds=0.0, max_timeouts=None):
    """At least n requests and `seconds` of them; fewer once max_timeouts have timed out (a
    starved server takes TIMEOUT each)."""
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 2})
    lat, timeouts, errors = [], 0, 0
    start = time.monotonic()
    while len(lat) < n or time.monotonic() - start < seconds:
        if max_timeouts is not None and timeouts >= max_timeouts:
            break
        t0 = time.monotonic()
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
            c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            c.close()
            if r.status != 200:
                errors += 1
            lat.append((time.monotonic() - t0) * 1000)
        except (socket.timeout, TimeoutError):
            timeouts += 1
            lat.append(timeout * 1000)
        except OSError:
            errors += 1
            lat.append((time.monotonic() - t0) * 1000)
    lat.sort()
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
    return {"n": len(lat), "timeouts": timeouts, "errors": errors, "p50": p(0.5), "p99": p(0.99)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shrike")
    ap.add_argument("model")
    ap.add_argument("--hostile", default="200,2000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--timeout", type=float, default=10)
    # Long enough to span the server's header deadline (10 s): when the hostile connections
    # time out together and are reopened together is part of what is measured.
    ap.add_argument("--round-seconds", type=float, default=12)
    ap.add_argument("--serve-arg", action="append", default=[])
    a = ap.parse_args()
    extra = [x for arg in a.serve_arg for x in arg.split("=", 1)]
    proc, port, log = start_server(a.shrike, a.model, extra)
    try:
        probe(port, 10, a.timeout)  # warm-up
        conditions = ["unloaded"] + [f"hostile {n}" for n in a.hostile.split(",")]
        results = {c: [] for c in conditions}
        print("| round | condition | requests | timeouts | errors | P50 ms | P99 ms |")
        print("|---|---|---|---|---|---|---|")
        for r in range(a.rounds):
            for c in conditions:
                if c == "unloaded":
                    res = probe(port, a.requests, a.timeout, a.round_seconds)
                else:
                    with Hostile(port, int(c.split()[1])):
                        res = probe(port, a.requests, a.timeout, a.round_seconds, max_timeouts=3)
                results[c].append(res)
                print(f"| {r + 1} | {c} | {res['n']} | {res['timeouts']} | {res['errors']} | "
                      f"{res['p50']:.1f} | {res['p99']:.1f} |", flush=True)
                time.sleep(2)  # the hostile connections' workers (old server) see them close
        base = statistics.median(x["p99"] for x in results["unloaded"])
        print()
        print("| condition | median P50 ms | median P99 ms | P99 / unloaded P99 | timeouts |")
        print("|---|---|---|---|---|")
        for c in conditions:
            p50 = statistics.median(x["p50"] for x in results[c])
            p99 = statistics.median(x["p99"] for x in results[c])
            print(f"| {c} | {p50:.1f} | {p99:.1f} | {p99 / base:.2f} | "
                  f"{sum(x['timeouts'] for x in results[c])} |")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            proc.kill()
        os.unlink(log)


if __name__ == "__main__":
    main()
