// Many concurrent streams on one model of a `shrike serve` (issue 31, acceptance 1): while
// STREAMS streaming completions stay open on model BURST (each reopened when it ends, so the
// count holds), are /health and a second model (PROBE) still answered as when the server is idle?
// Phases, in one run: idle (probe alone), loaded (the streams open), idle again. In each phase one
// client polls /health every 20 ms and another sends the probe model one non-streaming
// completion at a time; their latencies give P50/P99 per phase. The server's resident memory is
// read before and after the streams open (memory per stream, most of them waiting in the queue).
// The streams come from a child process at a lower CPU priority (--burst-nice, default 10): on
// a 2-core machine the load generator's own parsing would otherwise take CPU a real deployment's
// remote clients do not; the probes measure at normal priority.
//   node many_streams.mjs URL SERVER_PID [--streams 2000] [--seconds 30] [--burst burst]
//        [--probe probe] [--stream-tokens 256] [--probe-tokens 64] [--burst-nice 10]
// Prints one JSON object.
import http from "node:http";
import fs from "node:fs";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const args = process.argv.slice(2);
const url = new URL(args[0]);
const serverPid = Number(args[1]);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
};
const streams = Number(opt("streams", 2000));
const seconds = Number(opt("seconds", 30));
const burstModel = opt("burst", "burst");
const probeModel = opt("probe", "probe");
const streamTokens = Number(opt("stream-tokens", 256));
const probeTokens = Number(opt("probe-tokens", 64));
const probeStream = args.includes("--probe-stream");  // the probe streams too (timed to its end)

const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
const prompt = "Once upon a time, there was a little girl named Lily. She loved to play outside";

function rssMiB() {
  const status = fs.readFileSync(`/proc/${serverPid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)[1]) / 1024;
}

function request(method, path, body, onChunk, onHead) {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const req = http.request(
      { host: url.hostname, port: url.port, method, path, agent,
        headers: body ? { "Content-Type": "application/json" } : {} },
      (res) => {
        if (onHead) onHead(res);
        let text = "";
        res.on("data", (d) => {
          if (onChunk) onChunk(d);
          else text += d;
        });
        res.on("end", () => resolve({ status: res.statusCode, ms: performance.now() - t0, text }));
        res.on("error", () => resolve({ status: 0, ms: performance.now() - t0, text }));
      });
    req.on("error", (e) => resolve({ status: 0, ms: performance.now() - t0, text: String(e) }));
    if (body) req.write(JSON.stringify(body));
    req.end();
  });
}

function quantile(xs, q) {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
}
const summary = (xs) => ({ n: xs.length, p50_ms: quantile(xs, 0.5), p99_ms: quantile(xs, 0.99),
                           max_ms: quantile(xs, 1) });

// One measuring phase: /health every 20 ms and the probe model back to back, for `secs`.
async function measure(secs) {
  const health = [], probe = [], openSeen = [];
  let healthErrors = 0, probeErrors = 0;
  const end = performance.now() + secs * 1000;
  const healthLoop = (async () => {
    while (performance.now() < end) {
      const r = await request("GET", "/health");
      if (r.status === 200) health.push(r.ms);
      else ++healthErrors;
      openSeen.push(open);
      await new Promise((ok) => setTimeout(ok, 20));
    }
  })();
  const probeLoop = (async () => {
    while (performance.now() < end) {
      const r = await request("POST", "/v1/completions",
        { model: probeModel, prompt, max_tokens: probeTokens, ignore_eos: true, temperature: 0,
          stream: probeStream }, () => {});
      if (r.status === 200) probe.push(r.ms);
      else ++probeErrors;
    }
  })();
  await Promise.all([healthLoop, probeLoop]);
  return { health: { ...summary(health), errors: healthErrors },
           probe: { ...summary(probe), errors: probeErrors },
           streams_open_min: Math.min(...openSeen) };
}

// Streams on the burst model, each reopened when it ends until `stop` is set.
let stop = false;
let open = 0, opened = 0, failed = 0, tokensSeen = 0;
function streamForever(i) {
  return (async () => {
    while (!stop) {
      ++opened;
      let started = false;
      const r = await request("POST", "/v1/completions",
        { model: burstModel, prompt: `${i}: ${prompt}`, max_tokens: streamTokens, ignore_eos: true,
          stream: true },
        (chunk) => {
          for (const line of chunk.toString().split("\n")) if (line.startsWith("data: {")) ++tokensSeen;
        },
        (res) => {  // the head: the server holds the stream (running or queued)
          if (res.statusCode === 200) { started = true; ++open; }
        });
      if (started) --open;
      if (r.status !== 200) {
        ++failed;
        await new Promise((ok) => setTimeout(ok, 200));
      }
    }
  })();
}


if (args.includes("--burst-only")) {
  // The child: keeps the streams open and reports how many have their head, until SIGTERM.
  for (let i = 0; i < streams; ++i) streamForever(i);
  const report = setInterval(() => process.stdout.write(`open ${open} events ${tokensSeen} failed ${failed}\n`), 100);
  process.on("SIGTERM", () => { clearInterval(report); stop = true; agent.destroy(); process.exit(0); });
} else {
  const result = { streams, seconds, stream_tokens: streamTokens, probe_tokens: probeTokens };
  result.rss_idle_mib = rssMiB();
  result.idle_before = await measure(seconds / 2);
  const nice = opt("burst-nice", "10");
  const child = spawn("nice", ["-n", nice, process.execPath, fileURLToPath(import.meta.url),
                               ...process.argv.slice(2), "--burst-only"],
                      { stdio: ["ignore", "pipe", "inherit"] });
  let childEvents = 0;
  child.stdout.on("data", (d) => {
    const m = /open (\d+) events (\d+) failed (\d+)\s*$/.exec(d.toString().trim().split("\n").pop());
    if (m) { open = Number(m[1]); childEvents = Number(m[2]); failed = Number(m[3]); }
  });
  const t0 = performance.now();
  while (open < streams && performance.now() - t0 < 60000) await new Promise((ok) => setTimeout(ok, 50));
  result.streams_open_after_s = (performance.now() - t0) / 1000;
  result.streams_open = open;
  result.rss_streams_mib = rssMiB();
  result.rss_per_stream_kib = ((result.rss_streams_mib - result.rss_idle_mib) * 1024) / streams;
  const events0 = childEvents;
  result.loaded = await measure(seconds);
  result.stream_events_per_s = (childEvents - events0) / seconds;
  result.streams_failed = failed;
  child.kill("SIGTERM");  // its connections close: the server cancels their requests
  await new Promise((ok) => setTimeout(ok, 3000));
  open = 0;
  result.idle_after = await measure(seconds / 2);
  result.burst_nice = Number(nice);
  result.ratio_probe_p99 = result.loaded.probe.p99_ms /
    Math.max(result.idle_before.probe.p99_ms, result.idle_after.probe.p99_ms);
  console.log(JSON.stringify(result, null, 1));
  process.exit(0);
}
