#!/usr/bin/env bash
# Build and run the docker-compose demo cluster for real, with podman, and check it works.
#
# No Docker engine runs here and no image registry is reachable, so (see
# ../shared/notes/containers.md): podman (runc, overlay storage in a temp dir), local
# stand-ins for the two base images built with debootstrap and named exactly as the
# Dockerfile and compose file name them, our image built from docker/Dockerfile unchanged,
# and docker-compose talking to podman's API socket. Everything podman writes (images,
# containers, networks, the socket) lives in one temp dir that is removed at the end.
#
#   bash docker/test-compose.sh            (as root; installs what it needs with apt)
#   bash docker/test-compose.sh --prepare  (only make the kept stand-ins and wheels, if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
started=$(date +%s)
say() { printf '[compose-test %3ds] %s\n' $(( $(date +%s) - started )) "$*"; }

need() { command -v "$1" >/dev/null || missing="$missing $2"; }
missing=""
need podman podman; need runc runc; need debootstrap debootstrap; need docker-compose docker-compose
if [ -n "$missing" ]; then
  say "installing:$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq $missing >/dev/null
fi

# A run killed outright (SIGKILL: no EXIT trap) leaves its cluster running, and its DNS
# (aardvark-dns, whose state podman keeps machine-wide in /run/containers/networks) then
# breaks the next run's: its containers cannot resolve each other. Each run writes its pid
# into its dir; a dir whose run is gone (or, from before, untouched for an hour) is reaped.
unmount_under() {  # whatever is still mounted under $1, deepest first
  findmnt -rn -o TARGET | grep -F "$1/" | sort -r | while read -r m; do umount -l "$m"; done
  return 0
}
reap_stale() (  # (a subshell without set -e: each step is tried)
  set +e
  local old=$1 pid
  pid=$(cat "$old/owner" 2>/dev/null || true)
  if [ -n "$pid" ]; then
    kill -0 "$pid" 2>/dev/null && return 0  # a run beside this one
  else
    [ -n "$(find "$old" -maxdepth 0 -mmin -60)" ] && return 0
  fi
  say "reaping $old, left by a run that did not clean up"
  ( export CONTAINERS_CONF="$old/containers.conf" CONTAINERS_STORAGE_CONF="$old/storage.conf"
    podman rm -af -t 1 >/dev/null 2>&1
    podman system reset -f >/dev/null 2>&1 ) || true
  # its API service, container monitors and health-check loop: only processes naming this
  # run's own dir, in their command line or in the podman configuration they were given
  for p in $(pgrep -f -- "$old/"); do kill -9 "$p" 2>/dev/null; done
  for e in /proc/[0-9]*/environ; do
    grep -qzx -- "CONTAINERS_CONF=$old/containers.conf" "$e" 2>/dev/null || continue
    p=${e#/proc/}; kill -9 "${p%/environ}" 2>/dev/null
  done
  unmount_under "$old"
  rm -rf "$old"
)
for old in /tmp/drfmesos-compose.*; do [ -d "$old" ] && reap_stale "$old"; done

T=$(mktemp -d /tmp/drfmesos-compose.XXXXXX)
echo $$ >"$T/owner"
SOCK="$T/podman.sock"
cleanup() {
  set +e
  say "cleaning up"
  if [ -S "$SOCK" ]; then
    DOCKER_HOST="unix://$SOCK" docker-compose -f docker/docker-compose.yml -p drfdemo --profile c down -v -t 5 >/dev/null 2>&1
  fi
  [ -n "${HEALTH_PID:-}" ] && kill "$HEALTH_PID" 2>/dev/null
  # the jobs made beside the main line (each a process group of its own, so that this
  # reaches their apt-get and dpkg too)
  for job in ${ZK_PID:-} ${SECRETS_PID:-}; do kill -TERM -- "-$job" 2>/dev/null; wait "$job" 2>/dev/null; done
  [ -n "${SERVICE_PID:-}" ] && kill "$SERVICE_PID" 2>/dev/null && wait "$SERVICE_PID" 2>/dev/null
  podman rm -af -t 1 >/dev/null 2>&1
  podman system reset -f >/dev/null 2>&1
  # a build's overlay mounts can outlive the reset when a container was still going down,
  # and rm -rf would then stop at them
  unmount_under "$T"
  rm -rf "$T"
  say "cleaned up"
}
trap cleanup EXIT

mkdir -p "$T/storage" "$T/run" "$T/networks" "$T/tmp"
cat > "$T/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]
[engine]
runtime = "runc"
tmp_dir = "$T/tmp"
[network]
network_config_dir = "$T/networks"
CONF
cat > "$T/storage.conf" <<CONF
[storage]
driver = "overlay"
graphroot = "$T/storage"
runroot = "$T/run"
CONF
export CONTAINERS_CONF="$T/containers.conf" CONTAINERS_STORAGE_CONF="$T/storage.conf"

# -- stand-ins for the base images (the real ones cannot be pulled here) ------------------
# The cluster's credentials, made as a user would (docker/make-secrets.sh), in the temp dir,
# beside the rest (waited for before the cluster goes up), and, when the stand-ins are made,
# the ZooKeeper one (a JRE: the longest apt run) beside the Python one: each a background
# job in a process group of its own (set -m), ended by cleanup.
export DRFMESOS_SECRETS="$T/secrets"
set -m
bash docker/make-secrets.sh "$DRFMESOS_SECRETS" >"$T/secrets.log" 2>&1 &
SECRETS_PID=$!
set +m
# The stand-ins' root file systems are kept between runs, as a Docker host keeps the base
# images it pulled: in $DRFMESOS_STAND_INS (default /var/cache/drfmesos/stand-ins; `off`
# makes them anew every run), under a key of the recipe below, for a week.
STAND_INS=${DRFMESOS_STAND_INS:-/var/cache/drfmesos/stand-ins}
KEY=$(sed -n '/^# >>> recipe/,/^# <<< recipe/p' "$REPO/docker/test-compose.sh" | sha256sum | cut -c1-16)
KEPT="$STAND_INS/$KEY"
if [ "$STAND_INS" = off ]; then KEPT="$T/stand-ins"; fi
find "$STAND_INS" -mindepth 1 -maxdepth 1 -mtime +7 -exec rm -rf {} + 2>/dev/null || true
# The stand-ins as images: imported once from the two tars into a podman image store kept
# beside them ($KEPT/store), which every run reads as an additional image store (read-only,
# so runs side by side share it). Importing them every run took 15-20 s of disk and CPU.
import_zookeeper() { :; }  # (the recipe's last step: the store below takes the tar in)
make_store() {
  local store=(podman --root "$KEPT/store" --runroot "$T/store-run" --storage-driver overlay)
  rm -rf "$KEPT/store"
  say "import the stand-ins into $KEPT/store"
  "${store[@]}" import -q \
    --change 'ENV PATH=/usr/share/zookeeper/bin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["zkServer.sh", "start-foreground"]' - docker.io/library/zookeeper:3.8 \
    <"$KEPT/zookeeper.tar" >/dev/null
  "${store[@]}" import -q - docker.io/library/python:3.11-slim-bookworm <"$KEPT/python.tar" >/dev/null
  "${store[@]}" tag docker.io/library/python:3.11-slim-bookworm docker.io/library/eclipse-mosquitto:2
  touch "$KEPT/store/complete"
}
# >>> recipe for the stand-ins (a change here makes them anew)
ROOTFS="$T/rootfs"
zookeeper_stand_in() {  # Debian's zookeeper, run as the official image is
  mount -t proc proc "$T/rootfs-zk/proc"  # the JRE's setup runs java, which needs /proc
  chroot "$T/rootfs-zk" apt-get install -y -qq --no-install-recommends zookeeper \
    >"$T/chroot-zk.log" 2>&1 || { umount "$T/rootfs-zk/proc"; tail -20 "$T/chroot-zk.log"; exit 1; }
  umount "$T/rootfs-zk/proc"
  chroot "$T/rootfs-zk" apt-get clean
  tar -C "$T/rootfs-zk" -c . >"$KEPT/zookeeper.tar.part"
  mv "$KEPT/zookeeper.tar.part" "$KEPT/zookeeper.tar"
  rm -rf "$T/rootfs-zk"
  import_zookeeper
}
make_stand_ins() {
  mkdir -p "$KEPT"
  say "debootstrap a bookworm base"
  debootstrap --variant=minbase bookworm "$ROOTFS" >"$T/debootstrap.log" 2>&1
  # dpkg need not sync what it unpacks into stand-ins
  echo force-unsafe-io > "$ROOTFS/etc/dpkg/dpkg.cfg.d/drfmesos-unsafe-io"
  cp -a "$ROOTFS" "$T/rootfs-zk"
  say "make a stand-in as zookeeper:3.8, beside the Python one"
  set -m
  zookeeper_stand_in &
  ZK_PID=$!
  set +m
  chroot "$ROOTFS" apt-get install -y -qq --no-install-recommends \
    python3 python3-venv python3-pip mosquitto mosquitto-clients >"$T/chroot-apt.log" 2>&1
  chroot "$ROOTFS" apt-get clean
  # this workplace reaches PyPI through a TLS proxy with its own CA: give the stand-in the
  # host's trust store so pip inside `docker build` works (the real base needs nothing)
  cp /etc/ssl/certs/ca-certificates.crt "$ROOTFS/etc/ssl/certs/ca-certificates.crt"
  printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' > "$ROOTFS/etc/pip.conf"
  mkdir -p "$ROOTFS/mosquitto/config" "$ROOTFS/mosquitto/data"
  chmod 0777 "$ROOTFS/mosquitto/data"
  tar -C "$ROOTFS" -c . >"$KEPT/python.tar.part"
  mv "$KEPT/python.tar.part" "$KEPT/python.tar"
  rm -rf "$ROOTFS"
}
# <<< recipe
if [ -f "$KEPT/python.tar" ] && [ -f "$KEPT/zookeeper.tar" ]; then
  say "stand-ins kept from an earlier run ($KEPT)"
else
  # (those of an older recipe go)
  find "$STAND_INS" -mindepth 1 -maxdepth 1 ! -name "$KEY" -exec rm -rf {} + 2>/dev/null || true
  make_stand_ins
  wait "$ZK_PID" || { say "FAILED: the zookeeper stand-in"; exit 1; }
  ZK_PID=""
fi
exec 9>"$KEPT/store.lock"  # one run makes the store; one beside it waits for it
flock 9
[ -f "$KEPT/store/complete" ] || make_store
flock -u 9
exec 9>&-
cat >>"$T/storage.conf" <<CONF
[storage.options]
additionalimagestores = ["$KEPT/store"]
CONF

# -- our image, from docker/Dockerfile as it is ----------------------------------------------
# Its pip takes the wheels it installs from a local folder instead of PyPI, as the stand-ins
# stand in for the registry: kept in $DRFMESOS_WHEELS (default /var/cache/drfmesos/wheels;
# `off` makes pip in the build fetch from the index every run), under a key of the
# dependencies (pyproject.toml) and the stand-in's Python, for a week. The first run on a
# machine fetches them, with the stand-in's own pip, into the folder; the build then sees
# only that folder (no index). Only what pip reads changes: docker/Dockerfile runs as it is.
WHEEL_CACHE=${DRFMESOS_WHEELS:-/var/cache/drfmesos/wheels}
BUILD_MOUNTS=()
if [ "$WHEEL_CACHE" != off ]; then
  WKEY=$({ cat "$REPO/pyproject.toml"; echo "$KEY"; } | sha256sum | cut -c1-16)
  WHEELS="$WHEEL_CACHE/$WKEY"
  mkdir -p "$WHEEL_CACHE"
  find "$WHEEL_CACHE" -mindepth 1 -maxdepth 1 -mtime +7 -exec rm -rf {} + 2>/dev/null || true
  if [ ! -f "$WHEELS/complete" ]; then
    say "fetch the image's wheels into $WHEELS (once a week, or when pyproject.toml changes)"
    find "$WHEEL_CACHE" -mindepth 1 -maxdepth 1 ! -name "$WKEY*" -exec rm -rf {} + 2>/dev/null || true
    # the requirements of '.[all]' (its extras expanded) and its build backend's: what
    # the Dockerfile's `pip install '.[all]'` asks of the index
    python3 - "$REPO/pyproject.toml" >"$T/requirements.txt" <<'PY'
import re, sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))
extras, name = project["project"]["optional-dependencies"], project["project"]["name"]
def expand(reqs):
    for r in reqs:
        own = re.fullmatch(rf"{name}\[(.+)\]", r)
        yield from (x for e in own.group(1).split(",") for x in expand(extras[e])) if own else [r]
print("\n".join([*project["project"]["dependencies"], *expand(extras["all"]),
                 *project["build-system"]["requires"]]))
PY
    part="$WHEELS.part.$$"
    rm -rf "$part" && mkdir -p "$part"
    podman run --rm -q --network host -v "$T/requirements.txt:/requirements.txt:ro" \
      -v "$part:/wheels" docker.io/library/python:3.11-slim-bookworm sh -c \
      'python3 -m venv /tmp/venv && /tmp/venv/bin/pip download -q --only-binary=:all: -d /wheels -r /requirements.txt' \
      >"$T/wheels.log" 2>&1 || { cat "$T/wheels.log"; rm -rf "$part"; exit 1; }
    touch "$part/complete"
    mv -T "$part" "$WHEELS" 2>/dev/null || rm -rf "$part"  # (another run's, as good)
  fi
  printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\nno-index = true\nfind-links = /wheels\n' >"$T/pip.conf"
  BUILD_MOUNTS=(-v "$WHEELS:/wheels:ro" -v "$T/pip.conf:/etc/pip.conf:ro")
fi
if [ "${1:-}" = --prepare ]; then  # (.ci/run: the caches made, as a host pulls its bases)
  say "prepared: the stand-ins in $KEPT, the wheels in ${WHEELS:-(off)}"
  exit 0
fi
say "build localhost/drfmesos:latest"
podman build -q "${BUILD_MOUNTS[@]}" -f docker/Dockerfile -t localhost/drfmesos:latest . \
  >"$T/build.log" 2>&1 || { cat "$T/build.log"; exit 1; }
size=$(podman image inspect localhost/drfmesos:latest --format '{{.Size}}')
base=$(podman image inspect docker.io/library/python:3.11-slim-bookworm --format '{{.Size}}')
say "image size: $((size / 1024 / 1024)) MB (of which the base stand-in: $((base / 1024 / 1024)) MB)"

# -- the compose cluster -------------------------------------------------------------------
podman system service --time=0 "unix://$SOCK" >"$T/service.log" 2>&1 &
SERVICE_PID=$!
for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
export DOCKER_HOST="unix://$SOCK"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
HTTP_PORTS=("$(free)" "$(free)" "$(free)")  # master-1..3: the leader serves the UI
export DRFMESOS_BROKER_PORT=$PORT DRFMESOS_TASK_DURATION=4-8
export DRFMESOS_HTTP_PORT=${HTTP_PORTS[0]} DRFMESOS_HTTP_PORT_2=${HTTP_PORTS[1]} \
  DRFMESOS_HTTP_PORT_3=${HTTP_PORTS[2]}
wait "$SECRETS_PID" || { cat "$T/secrets.log"; exit 1; }
SECRETS_PID=""
OPERATOR=(--broker "mqtts://operator@127.0.0.1:$PORT" --secret-file "$DRFMESOS_SECRETS/secrets/operator"
          --ca "$DRFMESOS_SECRETS/ca.pem" --cluster demo)
COMPOSE=(docker-compose -f docker/docker-compose.yml -p drfdemo)

docker-compose -f docker/docker-compose.yml config -q
# podman times health checks with systemd timers, and there is no systemd here: run them
# ourselves, each container's at its own interval (the broker's 2 s, the masters' 5 s) and
# none for those without one, so depends_on: service_healthy and the checks work as in
# Docker (a check of each every 2 s kept about a core busy: a master's is a `drfmesos state`)
( declare -A every due
  while sleep 1; do
    now=$(date +%s)
    # (|| true: under set -e one failing check, a broker still starting, would end the loop)
    for c in $(podman ps -q 2>/dev/null || true); do
      if [ -z "${every[$c]:-}" ]; then  # its interval, once: "2s", "5s", or none
        i=$(podman inspect -f '{{if .Config.Healthcheck}}{{.Config.Healthcheck.Interval}}{{end}}' "$c" 2>/dev/null) || continue
        case $i in *m*|*h*|"") every[$c]=0 ;; *ms) every[$c]=1 ;; *s) every[$c]=${i%%[.s]*} ;; *) every[$c]=0 ;; esac
        [ "${every[$c]}" = 0 ] && [ -n "$i" ] && every[$c]=30  # minutes: rare enough
        due[$c]=$now
      fi
      [ "${every[$c]}" -gt 0 ] && [ "$now" -ge "${due[$c]}" ] || continue
      podman healthcheck run "$c" >/dev/null 2>&1 || true
      due[$c]=$(( $(date +%s) + every[$c] ))
    done
  done ) &
HEALTH_PID=$!
say "compose up (broker on 127.0.0.1:$PORT)"
up_at=$(date +%s)
"${COMPOSE[@]}" up -d --no-build >"$T/up.log" 2>&1 || { cat "$T/up.log"; exit 1; }

state() { drfmesos state "${OPERATOR[@]}" --json --timeout 5 2>/dev/null; }
wait_for() {  # wait_for SECONDS DESCRIPTION EXPRESSION: EXPRESSION over the snapshot `s`
  # one process, one connection, reading each snapshot the master publishes (a
  # `drfmesos state` a second cost about a CPU-second each: half a core while it waited)
  if ! "${PYTHON:-python3}" - "$1" "$3" "${OPERATOR[@]}" >"$T/wait.log" 2>&1 <<'PY'
import asyncio, json, sys, time
from cluster.local.view import wait_state
from protocol.tooling.brokers import BrokerURL
seconds, expression = float(sys.argv[1]), sys.argv[2]
o = dict(zip(sys.argv[3::2], sys.argv[4::2]))
url = BrokerURL.parse(o["--broker"], ca=o["--ca"], secret_file=o["--secret-file"])
last = {}
def holds(state):
    global last
    last = state.model_dump(mode="json")
    try:
        return bool(eval(expression, {"s": last}))  # (globals: comprehensions see s)
    except Exception:
        return False
deadline = time.monotonic() + seconds
while (left := deadline - time.monotonic()) > 0:
    try:
        asyncio.run(wait_state(url, o["--cluster"], holds, timeout=left))
        sys.exit(0)
    except TimeoutError:
        break
    except Exception as e:  # the broker not there yet: again, until the deadline
        print("retrying:", repr(e))
        time.sleep(1)
print(json.dumps(last, indent=2))
sys.exit(1)
PY
  then
    say "FAILED waiting for: $2"; cat "$T/wait.log"
    "${COMPOSE[@]}" logs --tail 30 || true
    exit 1
  fi
  say "ok: $2"
}
running() { echo "{f['name']: f['running_tasks'] for f in s['frameworks']}"; }

wait_for 120 "a task RUNNING" "any(t['state'] == 'TASK_RUNNING' for t in s['tasks'])"
say "from up to the first RUNNING task: $(( $(date +%s) - up_at )) s"
wait_for 90 "both frameworks hold tasks, 3 slaves" \
  "len(s['slaves']) == 3 and sorted(f['name'] for f in s['frameworks'] if f['running_tasks'] > 0) == ['A', 'B']"
wait_for 90 "shares near half each" \
  "all(0.3 <= f['dominant_share'] <= 0.7 for f in s['frameworks']) and len(s['frameworks']) == 2"
# the broker refuses what has no credentials, and a framework cannot read the state: each
# tried beside what follows (the framework's waits out its 3 s), its answer read after it
drfmesos state --broker "mqtts://127.0.0.1:$PORT" --ca "$DRFMESOS_SECRETS/ca.pem" \
  --cluster demo --timeout 3 >/dev/null 2>&1 &
ANONYMOUS_PID=$!
drfmesos state --broker "mqtts://C@127.0.0.1:$PORT" --secret-file "$DRFMESOS_SECRETS/secrets/C" \
  --ca "$DRFMESOS_SECRETS/ca.pem" --cluster demo --timeout 3 >/dev/null 2>&1 &
FRAMEWORK_PID=$!
drfmesos state "${OPERATOR[@]}" --timeout 5 | head -12
# the web UI and API on the leader's published port: the operator gets in, a wrong secret not
http_code() {  # http_code URL [USER:SECRET]
  python3 - "$@" <<'PY'
import base64, sys, urllib.error, urllib.request
request = urllib.request.Request(sys.argv[1])
if len(sys.argv) > 2:
    request.add_header("Authorization", "Basic " + base64.b64encode(sys.argv[2].encode()).decode())
try:
    print(urllib.request.urlopen(request, timeout=10).status)
except urllib.error.HTTPError as e:
    print(e.code)
except OSError:
    print(0)
PY
}
elected() {  # elected URL USER:SECRET: "yes" when that master's /health says it leads
  python3 - "$@" <<'PY'
import base64, json, sys, urllib.request
request = urllib.request.Request(sys.argv[1])
request.add_header("Authorization", "Basic " + base64.b64encode(sys.argv[2].encode()).decode())
try:
    print("yes" if json.load(urllib.request.urlopen(request, timeout=10)).get("elected") else "no")
except (OSError, ValueError):
    print("no")
PY
}
leader_ui() {  # the master port whose /health says it leads (standbys answer it too)
  for p in "${HTTP_PORTS[@]}"; do
    [ "$(elected "http://127.0.0.1:$p/health" "$1")" = yes ] && { echo "http://127.0.0.1:$p"; return; }
  done
}
ui=$(leader_ui "operator:$(cat "$DRFMESOS_SECRETS/secrets/operator")")
code=$(http_code "$ui/api/v1/frameworks" "operator:$(cat "$DRFMESOS_SECRETS/secrets/operator")")
bad=$(http_code "$ui/api/v1/frameworks" operator:wrong)
page=$(http_code "$ui/")
if [ "$code" != 200 ] || [ "$bad" != 401 ] || [ "$page" != 200 ]; then
  say "FAILED: web UI answered $code (operator), $bad (wrong secret), $page (page)"; exit 1
fi
say "ok: the web UI of the leader ($ui) answers the operator and refuses a wrong secret"
if wait "$ANONYMOUS_PID"; then say "FAILED: an anonymous client read the state"; exit 1; fi
if wait "$FRAMEWORK_PID"; then say "FAILED: a framework principal read the state"; exit 1; fi
say "ok: anonymous and framework principals cannot read the state"
for c in $(podman ps --format '{{.Names}}' | grep master-); do  # the compose file's check
  podman healthcheck run "$c" >/dev/null 2>&1 || {
    say "FAILED: $c's health check"; podman inspect -f '{{json .State.Health}}' "$c"; exit 1; }
done
say "ok: every master passes its health check"
reach_zk="import socket; socket.create_connection(('zookeeper', 2181), 3)"
one_of() { podman ps --format '{{.Names}}' | grep "$1" | head -1; }
podman exec "$(one_of master-)" python -c "$reach_zk" || {
  say "FAILED: a master cannot reach ZooKeeper"; exit 1; }
zk_ip=$(podman inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$(one_of zookeeper)")
for target in zookeeper "$zk_ip"; do  # (by name, and by address: no route either way)
  if podman exec "$(one_of slave-2)" python -c "${reach_zk/zookeeper/$target}" >/dev/null 2>&1; then
    say "FAILED: a slave's container (where tasks run) reaches ZooKeeper at $target"; exit 1
  fi
done
say "ok: the masters reach ZooKeeper, a slave and its tasks do not"

# master failover: kill the leading master's container; a standby leads, nothing is lost
leader_id=$(state | python3 -c 'import json,sys; print(json.load(sys.stdin)["master_id"])')
leader_port=${ui##*:}
for i in 1 2 3; do [ "${HTTP_PORTS[$((i - 1))]}" = "$leader_port" ] && leader_svc=master-$i; done
victim=$(podman ps --format '{{.Names}}' | grep "$leader_svc" | head -1)
say "kill the leader $victim ($leader_id)"
killed_at=$(date +%s)
podman kill "$victim" >/dev/null
wait_for 60 "a standby leads, both frameworks re-subscribed with their tasks" \
  "s['master_id'] != '$leader_id' and s['recovering_slaves'] == 0 and len(s['slaves']) == 3 and sorted(f['name'] for f in s['frameworks'] if f['active'] and f['running_tasks'] > 0) == ['A', 'B']"
say "failover (kill to a new leader's settled state): $(( $(date +%s) - killed_at )) s"

victim=$(podman ps --format '{{.Names}}' | grep slave-1 | head -1)
say "kill $victim"
podman kill "$victim" >/dev/null
"${COMPOSE[@]}" stop -t 1 slave-1 >/dev/null 2>&1 || true  # keep it down: no restart
wait_for 60 "the slave is removed" "len(s['slaves']) == 2 and s['recovering_slaves'] == 0"
lost=$("${COMPOSE[@]}" logs framework-a framework-b 2>/dev/null | grep -c TASK_LOST || true)
[ "$lost" -gt 0 ] || { say "FAILED: no TASK_LOST reached the frameworks"; exit 1; }
say "ok: $lost TASK_LOST updates reached the frameworks"
wait_for 60 "its tasks are replaced on the other slaves" \
  "sum(f['running_tasks'] for f in s['frameworks']) >= 6 and all(t['slave_id'] in {x['slave_id'] for x in s['slaves']} for t in s['tasks'])"

say "compose down"
"${COMPOSE[@]}" --profile c down -v -t 5 >/dev/null 2>&1
say "PASSED in $(( $(date +%s) - started )) s"
