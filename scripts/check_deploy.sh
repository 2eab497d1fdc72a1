#!/usr/bin/env bash
# Offline checks of deploy/ (no cluster, no container engine needed; each step says what it could
# not run here):
# 1. `kubectl kustomize deploy/k8s` renders every manifest (YAML and kustomize structure);
#    `kubectl apply --dry-run=client` needs an API server for its type mapping, so it runs only
#    when one answers.
# 2. A schema check of each object (python3-yaml): apiVersion/kind known, required fields of each
#    kind, probes on routes shrike serves (/health readiness, /live liveness), container port =
#    Service targetPort = InferencePool targetPort, selectors match the pod labels, the HPA targets
#    the Deployment, the InferenceObjective names the pool, non-root security context, resources set.
# 3. The Containerfile against Debian: its runtime packages exist in apt, and every shared library
#    `ldd build/shrike` lists is provided by one of them, by their dependencies, or by the base
#    image's required packages. `docker build -f deploy/Containerfile .` runs only when a container
#    engine answers.
# Installs python3-yaml when missing. Exit 1 when a check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
shrike=${1:-build/shrike}
if ! python3 -c 'import yaml' 2>/dev/null; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends python3-yaml
fi
status=0

echo "== kubectl"
if command -v kubectl >/dev/null 2>&1; then
  kubectl kustomize deploy/k8s >/tmp/shrike-deploy-rendered.yaml
  echo "kubectl kustomize deploy/k8s: $(grep -c '^kind:' /tmp/shrike-deploy-rendered.yaml) objects rendered"
  if kubectl version --request-timeout=3s >/dev/null 2>&1; then
    kubectl apply --dry-run=client --validate=false -k deploy/k8s
  else
    echo "not run: kubectl apply --dry-run=client (no API server answers; the client needs one for its type mapping)"
  fi
else
  echo "not run: kubectl is not installed (Debian has no kubectl package)"
fi

echo "== schema"
python3 - deploy/k8s <<'PY' || status=1
import glob, os, sys, yaml
docs = []
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.yaml"))):
    if path.endswith("kustomization.yaml"):
        continue
    for d in yaml.safe_load_all(open(path)):
        if d is not None:
            docs.append((os.path.basename(path), d))
errors = []
def need(cond, msg):
    if not cond:
        errors.append(msg)
def get(d, *keys):
    for k in keys:
        if isinstance(d, dict) and k in d:
            d = d[k]
        elif isinstance(d, list) and isinstance(k, int) and k < len(d):
            d = d[k]
        else:
            return None
    return d
known = {("apps/v1", "Deployment"), ("v1", "Service"),
         ("inference.networking.k8s.io/v1", "InferencePool"),
         ("inference.networking.x-k8s.io/v1alpha2", "InferenceObjective"),
         ("gateway.networking.k8s.io/v1", "HTTPRoute"),
         ("autoscaling/v2", "HorizontalPodAutoscaler")}
by_kind = {}
for f, d in docs:
    kind = (d.get("apiVersion"), d.get("kind"))
    need(kind in known, f"{f}: unknown apiVersion/kind {kind}")
    need(bool(get(d, "metadata", "name")), f"{f}: {kind[1]} without metadata.name")
    by_kind.setdefault(d.get("kind"), []).append((f, d))
routes = {"/health", "/live", "/metrics"}
dep_f, dep = by_kind["Deployment"][0]
pod_labels = get(dep, "spec", "template", "metadata", "labels") or {}
need(get(dep, "spec", "selector", "matchLabels") == pod_labels, f"{dep_f}: selector != pod labels")
pod = get(dep, "spec", "template", "spec")
c = get(pod, "containers", 0)
need(get(pod, "securityContext", "runAsNonRoot") is True, f"{dep_f}: runAsNonRoot not set")
need(get(c, "securityContext", "allowPrivilegeEscalation") is False, f"{dep_f}: privilege escalation allowed")
ports = {p["name"]: p["containerPort"] for p in get(c, "ports") or []}
need("http" in ports, f"{dep_f}: no port named http")
for probe, path in (("readinessProbe", "/health"), ("livenessProbe", "/live"), ("startupProbe", "/live")):
    need(get(c, probe, "httpGet", "path") == path, f"{dep_f}: {probe} should GET {path}")
    need(get(c, probe, "httpGet", "port") in ("http", ports.get("http")), f"{dep_f}: {probe} port")
for k in ("cpu", "memory"):
    need(get(c, "resources", "requests", k) is not None, f"{dep_f}: no {k} request")
    need(get(c, "resources", "limits", k) is not None, f"{dep_f}: no {k} limit")
args = get(c, "args") or []
need("--metrics-compat" in args and "vllm" in args, f"{dep_f}: the picker needs --metrics-compat vllm")
grace = get(pod, "terminationGracePeriodSeconds") or 30
drain = float(args[args.index("--drain-timeout") + 1]) if "--drain-timeout" in args else 30
need(grace > drain, f"{dep_f}: terminationGracePeriodSeconds {grace} <= --drain-timeout {drain}")
mounts = {m["name"] for m in get(c, "volumeMounts") or []}
vols = {v["name"] for v in get(pod, "volumes") or []}
need(mounts <= vols, f"{dep_f}: volumeMounts without volumes: {mounts - vols}")
svc_f, svc = by_kind["Service"][0]
need(get(svc, "spec", "selector") == pod_labels, f"{svc_f}: selector != pod labels")
need(get(svc, "spec", "ports", 0, "targetPort") in ("http", ports.get("http")), f"{svc_f}: targetPort")
pool_f, pool = by_kind["InferencePool"][0]
need(get(pool, "spec", "selector", "matchLabels") == pod_labels, f"{pool_f}: selector != pod labels")
need([p.get("number") for p in get(pool, "spec", "targetPorts") or []] == [ports.get("http")],
     f"{pool_f}: targetPorts != the container port {ports.get('http')}")
need(bool(get(pool, "spec", "endpointPickerRef", "name")), f"{pool_f}: no endpointPickerRef.name")
need(get(pool, "spec", "endpointPickerRef", "failureMode") in (None, "FailOpen", "FailClose"),
     f"{pool_f}: failureMode must be FailOpen or FailClose")
for f, o in by_kind.get("InferenceObjective", []):
    need(get(o, "spec", "poolRef", "name") == pool["metadata"]["name"], f"{f}: poolRef != the pool")
    need(isinstance(get(o, "spec", "priority"), int), f"{f}: priority must be an integer")
for f, r in by_kind.get("HTTPRoute", []):
    ref = get(r, "spec", "rules", 0, "backendRefs", 0)
    need(ref and ref.get("kind") == "InferencePool" and ref.get("name") == pool["metadata"]["name"],
         f"{f}: the route's backend is not the pool")
hpa_f, hpa = by_kind["HorizontalPodAutoscaler"][0]
need(get(hpa, "spec", "scaleTargetRef", "name") == dep["metadata"]["name"], f"{hpa_f}: target")
need(get(hpa, "spec", "minReplicas") <= get(hpa, "spec", "maxReplicas"), f"{hpa_f}: min > max")
need(get(hpa, "spec", "metrics", 0, "pods", "metric", "name") == "shrike_requests_waiting",
     f"{hpa_f}: not scaling on shrike_requests_waiting")
print(f"{len(docs)} objects checked: " + ", ".join(f"{d['kind']}/{d['metadata']['name']}" for _, d in docs))
if errors:
    print("FAILED:\n  " + "\n  ".join(errors))
    sys.exit(1)
PY

echo "== Containerfile"
python3 - deploy/Containerfile "$shrike" <<'PY' || status=1
import os, re, subprocess, sys
text = open(sys.argv[1]).read()
binary = sys.argv[2]
stages = re.split(r"^FROM ", text, flags=re.M)[1:]
errors = []
if len(stages) != 2:
    errors.append(f"expected 2 stages, found {len(stages)}")
runtime = stages[-1]
if not re.search(r"^USER (?!root|0\b)\S+", runtime, re.M):
    errors.append("the runtime stage does not switch to a non-root USER")
if "COPY --from=build" not in runtime:
    errors.append("the runtime stage does not copy the binary from the build stage")
def apt_packages(stage):
    # The words of `apt-get install ...` up to the next && (continuation lines joined).
    joined = stage.replace("\\\n", " ")
    m = re.search(r"apt-get install(.*?)(&&|$)", joined, re.M)
    words = m.group(1).split() if m else []
    return [w for w in words if re.fullmatch(r"[a-z0-9][a-z0-9.+-]+", w)]
pkgs = apt_packages(runtime)
print("runtime packages:", " ".join(pkgs))
for p in pkgs:
    if subprocess.run(["apt-cache", "show", p], capture_output=True).returncode != 0:
        errors.append(f"runtime package {p} is not in this machine's apt sources")
# What the runtime packages bring, and what debian:bookworm-slim has anyway (Priority: required).
dep = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
                      "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances"] + pkgs,
                     capture_output=True, text=True).stdout
closure = {l.strip() for l in dep.splitlines() if l and not l.startswith(" ")}
closure |= {re.sub(r"^.*Depends: ", "", l).strip().strip("<>") for l in dep.splitlines() if "Depends:" in l}
required = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Priority}\n"],
                          capture_output=True, text=True).stdout
base = {l.split()[0] for l in required.splitlines() if l.endswith(" required")}
base |= {"libc6", "libgcc-s1", "libstdc++6", "zlib1g"}  # in every Debian image
if not os.path.exists(binary):
    print(f"not run: the library check (no binary at {binary}; build it first)")
else:
    libs = [l.split()[2] for l in subprocess.run(["ldd", binary], capture_output=True,
            text=True).stdout.splitlines() if "=>" in l and len(l.split()) > 2]
    for lib in libs:
        owner = ""
        for cand in (lib, os.path.realpath(lib), lib.replace("/lib/", "/usr/lib/", 1)):
            r = subprocess.run(["dpkg", "-S", cand], capture_output=True, text=True)
            if r.returncode == 0:
                owner = r.stdout.split(":")[0].split(",")[0].strip()
                break
        if not owner:
            errors.append(f"{lib}: no Debian package owns it")
        elif owner not in closure and owner not in base:
            errors.append(f"{lib} ({owner}) is neither a runtime package, a dependency of one, "
                          "nor in the base image")
    print(f"{len(libs)} shared libraries of {binary} are provided by the runtime packages, their "
          "dependencies or the base image" if not errors else "")
if errors:
    print("FAILED:\n  " + "\n  ".join(errors))
    sys.exit(1)
PY
if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
  docker build -f deploy/Containerfile -t shrike:check .
else
  echo "not run: docker build (no container engine answers here)"
fi
exit $status
