#!/usr/bin/env bash
# Container smoke test: builds the image from the Dockerfile and runs docker-compose.yml's demo
# stack — Redis, two workers, the scheduler, the dashboard and the simulator — with podman, drives
# an import through it to the end, checks the dashboard's /readyz and the run's counts (from the
# CLI and from the dashboard), then stops and removes everything, also when a step fails.
#
# Machines here pull no image, so the base images the files name (node:24-bookworm-slim,
# redis:7) are stood in by images made from Debian's packages: debootstrap (from the mirror apt
# uses) imported as debian:bookworm-slim, Node from the npm registry's `node` package with npm
# beside it, Debian's redis-server. They stay in podman's storage, made only when missing (a
# fresh machine takes longer). The Dockerfile and compose file are used as a user with a
# registry runs them, with no override file.
#
# Runs as root (podman rootful), after `npm test` in .ci/run. Installs podman, runc, debootstrap
# and docker-compose with apt-get when missing. Env: CONTAINER_SMOKE_TIMEOUT (s, default 360;
# 600 s more when the stand-ins are to be made) bounds the run; CONTAINER_SMOKE_KEEP=1 leaves a
# passed stack up (for a look; remove it yourself).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[container-smoke] %s (%s s)\n' "$*" "$SECONDS"; }
fail() {
  log "FAILED: $*"
  exit 1
}

# --- tools ------------------------------------------------------------------------------------
need=()
command -v podman >/dev/null || need+=(podman)
command -v runc >/dev/null || need+=(runc)
command -v debootstrap >/dev/null || need+=(debootstrap)
# docker-compose (Debian's 1.29, the compose spec with profiles, --scale and depends_on
# conditions) against podman's Docker-compatible API. Debian's podman-compose 1.0.3 knows no
# profiles and ignores --scale, so it cannot run this file as written.
command -v docker-compose >/dev/null || need+=(docker-compose)
command -v curl >/dev/null || need+=(curl)
if [ "${#need[@]}" -gt 0 ]; then
  log "installing ${need[*]} from Debian packages"
  if [ -z "${CI_APT_UPDATED:-}" ]; then apt-get update -qq; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

WORK="$(mktemp -d /tmp/crm-sync-container-smoke.XXXXXX)"
PROJECT="crmsyncsmoke$$"
IMAGE="localhost/crm-sync-smoke"
SERVICE_PID=""
HEALTH_PID=""
WATCHDOG_PID=""

# crun and podman's default ulimits are refused on these machines; runc with no default ulimits
# works. cgroupfs and a file events log: there is no systemd to ask.
cat >"$WORK/containers.conf" <<'EOF'
[containers]
default_ulimits = []
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
export CONTAINERS_CONF="$WORK/containers.conf"

# docker-compose talks to podman's Docker-compatible API on a socket of this run's own.
export DOCKER_HOST="unix://$WORK/podman.sock"
# The user's file as it is: this machine needs no override (bridge networks, their DNS and
# published ports work with podman here; only the build uses the host's network).
COMPOSE=(docker-compose -p "$PROJECT" -f docker-compose.yml --profile demo)
compose() { "${COMPOSE[@]}" "$@"; }

start_service() {
  rm -f "$WORK/podman.sock"
  podman system service --time=0 "$DOCKER_HOST" >>"$WORK/service.log" 2>&1 &
  SERVICE_PID=$!
  for _ in $(seq 1 50); do [ -S "$WORK/podman.sock" ] && return 0; sleep 0.2; done
  return 1
}

cleanup() {
  local rc=$?
  set +e
  [ -n "$WATCHDOG_PID" ] && pkill -P "$WATCHDOG_PID" sleep 2>/dev/null && kill "$WATCHDOG_PID" 2>/dev/null
  [ -n "$HEALTH_PID" ] && kill "$HEALTH_PID" 2>/dev/null
  # The watchdog stops every child, the API service too: compose needs it back to stop the stack.
  if [ -n "$SERVICE_PID" ] && ! kill -0 "$SERVICE_PID" 2>/dev/null; then start_service; fi
  if [ "$rc" -ne 0 ] && [ -S "$WORK/podman.sock" ]; then
    log "the stack's last log lines:"
    compose logs --no-color --tail=40 2>&1 | tail -120
  fi
  if [ "${CONTAINER_SMOKE_KEEP:-}" = 1 ] && [ "$rc" -eq 0 ]; then
    log "CONTAINER_SMOKE_KEEP=1: stack $PROJECT left up (DOCKER_HOST=$DOCKER_HOST)"
    return
  fi
  if [ -S "$WORK/podman.sock" ]; then
    compose down --volumes --remove-orphans --timeout 45 >/dev/null 2>&1
  fi
  # Whatever compose left (a failed `up`, a run container): by the project's label, then pods,
  # networks and volumes named after it.
  podman ps -aq --filter "label=com.docker.compose.project=$PROJECT" | xargs -r podman rm -f -t 5 >/dev/null 2>&1
  podman pod ls -q --filter "name=$PROJECT" | xargs -r podman pod rm -f >/dev/null 2>&1
  podman network ls -q --filter "name=^${PROJECT}_" | xargs -r podman network rm -f >/dev/null 2>&1
  podman volume ls -q --filter "name=^${PROJECT}_" | xargs -r podman volume rm -f >/dev/null 2>&1
  [ -n "$SERVICE_PID" ] && kill "$SERVICE_PID" 2>/dev/null && wait "$SERVICE_PID" 2>/dev/null
  rm -rf "$WORK"
  log "stopped and removed (exit $rc)"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- stand-in base images ------------------------------------------------------------------------
# A stand-in carries this label; an image of the same name without it (a real one) is used as is.
STANDIN_LABEL="org.crm-sync.stand-in"
STANDIN_RECIPE="1"
standin_current() {
  [ "$(podman image inspect --format "{{ index .Labels \"$STANDIN_LABEL\" }}" "$1" 2>/dev/null)" = "$STANDIN_RECIPE" ] \
    || { podman image exists "$1" && [ -z "$(podman image inspect --format "{{ index .Labels \"$STANDIN_LABEL\" }}" "$1")" ]; }
}

# The Debian mirror apt already uses (deb822 .sources or one-line .list), for debootstrap.
debian_mirror() {
  {
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
      | awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /\]$/) { print $i, $(i + 1); break } }'
    cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '
      /^URIs:/ { uri = $2 } /^Suites:/ { s = $0 }
      /^$/ { if (uri != "" && s != "") print uri, s; uri = ""; s = "" }
      END { if (uri != "" && s != "") print uri, s }'
  } | awk '{ for (i = 2; i <= NF; i++) if ($i == "bookworm") { print $1; exit } }'
}

make_debian() {
  local mirror rootfs="$WORK/rootfs"
  mirror="$(debian_mirror)"
  [ -n "$mirror" ] || fail "no bookworm mirror in /etc/apt/sources.list*"
  log "debootstrap --variant=minbase bookworm from $mirror"
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$WORK/debootstrap.log" 2>&1 \
    || { tail -20 "$WORK/debootstrap.log"; fail "debootstrap"; }
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb
  tar -C "$rootfs" -c . | podman import --change 'CMD ["bash"]' --change "LABEL $STANDIN_LABEL=$STANDIN_RECIPE" \
    - docker.io/library/debian:bookworm-slim >/dev/null
  rm -rf "$rootfs"
}

make_node() {
  local ctx="$WORK/node-ctx" version
  mkdir -p "$ctx/usr-local/bin"
  log "node@24 and npm@11 from the npm registry for node:24-bookworm-slim"
  npm install --prefix "$WORK/node-pkg" --no-audit --no-fund --loglevel=error node@24 >/dev/null
  cp -L "$WORK/node-pkg/node_modules/node/bin/node" "$ctx/usr-local/bin/node"
  npm install --global --prefix "$ctx/usr-local" --no-audit --no-fund --loglevel=error npm@11 >/dev/null
  version="$("$ctx/usr-local/bin/node" --version)"
  # What the official image has that the Dockerfile relies on: node and npm in /usr/local/bin,
  # and the unprivileged user `node` (uid 1000) it switches to.
  cat >"$ctx/Containerfile" <<EOF
FROM docker.io/library/debian:bookworm-slim
COPY usr-local/ /usr/local/
RUN groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node
ENV NODE_VERSION=${version#v}
LABEL $STANDIN_LABEL=$STANDIN_RECIPE
CMD ["node"]
EOF
  podman build --pull=never --network=host -q -t docker.io/library/node:24-bookworm-slim "$ctx" >/dev/null
  rm -rf "$ctx" "$WORK/node-pkg"
}

make_redis() {
  local ctx="$WORK/redis-ctx"
  mkdir -p "$ctx"
  log "Debian's redis-server for redis:7"
  # The official image's WORKDIR /data (the compose file's volume) and redis-server/redis-cli on PATH.
  cat >"$ctx/Containerfile" <<EOF
FROM docker.io/library/debian:bookworm-slim
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server \
  && rm -rf /var/lib/apt/lists/* && mkdir -p /data
WORKDIR /data
LABEL $STANDIN_LABEL=$STANDIN_RECIPE
EXPOSE 6379
CMD ["redis-server"]
EOF
  podman build --pull=never --network=host -q -t docker.io/library/redis:7 "$ctx" >/dev/null
  rm -rf "$ctx"
}

# The whole run is bounded: CONTAINER_SMOKE_TIMEOUT seconds (default 360) when the stand-ins are
# cached, 600 s more when they are to be made. Over it, the watchdog stops the script's own
# children (by parent id) and the script, whose exit trap then removes the stack.
missing=0
for image in docker.io/library/debian:bookworm-slim docker.io/library/node:24-bookworm-slim docker.io/library/redis:7; do
  standin_current "$image" || missing=1
done
BUDGET=$((${CONTAINER_SMOKE_TIMEOUT:-360} + missing * 600))
(
  sleep "$BUDGET"
  log "over the budget of $BUDGET s: stopping"
  kill -TERM $$
  pkill -TERM -P $$
) &
WATCHDOG_PID=$!

t0=$SECONDS
standin_current docker.io/library/debian:bookworm-slim || make_debian
standin_current docker.io/library/node:24-bookworm-slim || make_node
standin_current docker.io/library/redis:7 || make_redis
log "base images ready in $((SECONDS - t0)) s"

# --- the image, as the Dockerfile says -----------------------------------------------------------
t0=$SECONDS
log "building $IMAGE from the Dockerfile (--pull=never)"
# Host network for the build's npm ci (the registry); the layers stay cached between runs.
build_mounts=()
cafile="$(npm config get cafile 2>/dev/null || true)"
if [ -n "$cafile" ] && [ "$cafile" != null ] && [ "$cafile" != undefined ] && [ -f "$cafile" ]; then
  # This machine reaches the registry through a proxy whose CA only its own trust store holds
  # (npm's cafile). The build's RUN steps see it by mounts, which leave no trace in the image:
  # npm's global config (/usr/local/etc/npmrc in the node image) names the mounted bundle.
  printf 'cafile=/etc/ssl/certs/crm-sync-smoke-ca.crt\n' >"$WORK/npmrc"
  build_mounts=(-v "$cafile:/etc/ssl/certs/crm-sync-smoke-ca.crt:ro" -v "$WORK/npmrc:/usr/local/etc/npmrc:ro")
  log "the build trusts npm's cafile $cafile (mounted for the RUN steps only)"
fi
# The build stage gets a tag of its own, so its layers (npm ci with the dev dependencies) stay
# cached; the previous run's stage images, untagged now, are pruned by their label.
build=(podman build --pull=never --network=host "${build_mounts[@]}" --label org.crm-sync.smoke=1 -q)
{ "${build[@]}" --target build -t "$IMAGE-build" . && "${build[@]}" -t "$IMAGE" .; } >"$WORK/build.log" 2>&1 \
  || { tail -40 "$WORK/build.log"; fail "podman build"; }
podman image prune -f --filter label=org.crm-sync.smoke=1 >/dev/null
log "image built in $((SECONDS - t0)) s"

# --- the stack ---------------------------------------------------------------------------------
start_service || fail "podman system service did not open $DOCKER_HOST"

free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
DASHBOARD_PORT="$(free_port)"
SIM_PORT="$(free_port)"
TOKEN="$(node -e 'console.log(require("crypto").randomBytes(16).toString("hex"))')"
export CRM_SYNC_IMAGE="$IMAGE" DASHBOARD_PORT SIM_PORT CRM_SYNC_DASHBOARD_TOKEN="$TOKEN"
unset ACME_API_KEY SIM_KEY_ACME

# No systemd here, so podman runs no healthcheck timers and no container would turn healthy
# (`depends_on: condition: service_healthy` would wait for ever): this loop is the timer.
(
  while sleep 2; do
    podman ps -q --filter "label=com.docker.compose.project=$PROJECT" --filter health=starting \
      | xargs -r -n1 podman healthcheck run >/dev/null 2>&1
    podman ps -q --filter "label=com.docker.compose.project=$PROJECT" --filter health=healthy \
      | xargs -r -n1 podman healthcheck run >/dev/null 2>&1
  done
) &
HEALTH_PID=$!

t0=$SECONDS
log "compose up: redis, 2 workers, scheduler, dashboard, sim (project $PROJECT)"
timeout 240 "${COMPOSE[@]}" up -d --no-build --scale worker=2 >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log"; fail "compose up"; }

until_ok() { # $1: what, $2: seconds, rest: command
  local what=$1 until=$((SECONDS + $2))
  shift 2
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$until" ] || fail "$what"
    sleep 1
  done
}
readyz() { [ "$(curl -fsS --max-time 3 "http://127.0.0.1:$DASHBOARD_PORT/readyz")" = ready ]; }
until_ok "the dashboard's /readyz did not answer ready on 127.0.0.1:$DASHBOARD_PORT" 90 readyz
log "dashboard /readyz: ready (stack up in $((SECONDS - t0)) s)"

running="$(podman ps --filter "label=com.docker.compose.project=$PROJECT" --format '{{ index .Labels "com.docker.compose.service" }}' | sort | tr '\n' ' ')"
[ "$running" = "dashboard redis scheduler sim worker worker " ] || fail "running services: $running"

# Redis is on the internal network only: nothing published, and no container address of it on
# the network the other services reach the CRM by.
redis_ports="$(podman ps --filter "label=com.docker.compose.service=redis" --filter "label=com.docker.compose.project=$PROJECT" --format '{{.Ports}}')"
[ -z "$redis_ports" ] || fail "redis publishes $redis_ports"
redis_nets="$(podman inspect --format '{{ range $k, $v := .NetworkSettings.Networks }}{{ $k }} {{ end }}' "$(podman ps -q --filter "label=com.docker.compose.service=redis" --filter "label=com.docker.compose.project=$PROJECT")")"
[ "$redis_nets" = "${PROJECT}_backend " ] || fail "redis is on networks: $redis_nets"
[ "$(podman network inspect --format '{{ .Internal }}' "${PROJECT}_backend")" = true ] \
  || fail "network ${PROJECT}_backend is not internal"
log "redis: on the internal network ${PROJECT}_backend only, no port published"

# --- an import through it ------------------------------------------------------------------------
# samples/deals-update.csv (made by samples/make-samples.ts from the demo simulator's seed data):
# 40 rows, 36 good, 2 invalid (an amount that is no number, a missing name: never sent) and 2
# the CRM refuses (no such deal: 404; an unknown stage: 422). So the run must end completed with
# exactly 36 succeeded, 2 invalid, 2 failed, and the import exit with 1 (ROWS_FAILED).
t0=$SECONDS
log "import samples/deals-update.csv (deal.update, 40 rows) through the workers"
# In the first worker's container: compose 1.29's `run` asks for container links, which podman
# refuses ("link is not supported"); `docker compose run --rm worker import …` as docs/production.md
# has it works with Docker's compose. exec skips the image's entrypoint, hence node bin/crm-sync.js.
CRM_SYNC=("${COMPOSE[@]}" exec -T --index=1 worker node bin/crm-sync.js)
set +e
timeout 180 "${CRM_SYNC[@]}" import samples/deals-update.csv --op deal.update -w acme \
  --mapping samples/deals-mapping.json --wait >"$WORK/import.log" 2>&1
import_rc=$?
set -e
sed 's/^/  | /' "$WORK/import.log"
[ "$import_rc" -eq 1 ] || fail "the import exited $import_rc, not 1 (ROWS_FAILED: the sample's 2 rows the CRM refuses)"
run_id="$(grep -oE '[0-9]{8}-[0-9]{6}-[0-9]{3}-[0-9a-z]{8}' "$WORK/import.log" | head -1)"
[ -n "$run_id" ] || fail "no run id in the import's output"
log "run $run_id ended in $((SECONDS - t0)) s"

set +e
timeout 60 "${CRM_SYNC[@]}" runs show "$run_id" --json >"$WORK/show.json" 2>"$WORK/show.err"
show_rc=$?
set -e
[ "$show_rc" -eq 1 ] || { cat "$WORK/show.err"; fail "runs show exited $show_rc, not 1"; }
node -e '
  const { run, problems } = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const want = { total: 40, succeeded: 36, invalid: 2, failed: 2 };
  const c = run.counts;
  const wrong = Object.keys(c).filter((k) => c[k] !== (want[k] ?? 0));
  console.log(`  status ${run.status}, counts ${JSON.stringify(c)}`);
  const refused = problems.rows.filter((r) => r.status === "failed").map((r) => r.httpStatus).sort();
  console.log(`  failed rows answered HTTP ${refused.join(", ")}`);
  if (run.status !== "completed" || wrong.length > 0) process.exit(1);
  if (refused.length !== 2 || !refused.includes(404)) process.exit(1);
' "$WORK/show.json" || fail "the run did not end completed with 36 succeeded, 2 invalid, 2 failed (one a 404)"

# The CRM really holds what the run says it wrote: the first row's new name, as the simulator
# lists it through its published port.
first_id="$(sed -n 2p samples/deals-update.csv | cut -d, -f1)"
curl -fsS --max-time 10 -H "Host: acme.localhost:$SIM_PORT" -H "X-Api-Key: sim-key-acme" \
  "http://127.0.0.1:$SIM_PORT/api/external/v2/deals?page_size=100" >"$WORK/deals.json" \
  || fail "the simulator did not list its deals"
node -e '
  const deal = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).deals.find((d) => d.id === process.argv[2]);
  console.log(`  deal ${process.argv[2]} in the simulator: ${deal?.name}`);
  if (!deal?.name?.endsWith(", renewal")) process.exit(1);
' "$WORK/deals.json" "$first_id" || fail "the simulator does not hold the update of deal $first_id"

# The dashboard reads the same Redis: its results export has one line per row.
curl -fsS --max-time 10 -H "Authorization: Bearer $TOKEN" \
  "http://127.0.0.1:$DASHBOARD_PORT/runs/$run_id/results.csv" >"$WORK/results.csv" || fail "the dashboard's results.csv"
csv_rows="$(node -e '
  // Records, not lines: a quoted cell may hold a line break.
  const text = require("fs").readFileSync(process.argv[1], "utf8");
  let records = 0, quoted = false;
  for (let i = 0; i < text.length; i++) {
    if (text[i] === "\"") quoted = !quoted;
    else if (text[i] === "\n" && !quoted) records++;
  }
  console.log(records - 1);
' "$WORK/results.csv")"
[ "$csv_rows" = 40 ] || fail "the dashboard's results.csv has $csv_rows rows, the run 40"
log "the dashboard exports the run's 40 results"

# Every process stayed up the whole time: none restarted (restart: unless-stopped would hide a
# crash loop from a look at what runs now).
restarts="$(podman ps -aq --filter "label=com.docker.compose.project=$PROJECT" | xargs podman inspect \
  --format '{{ index .Config.Labels "com.docker.compose.service" }}={{ .RestartCount }}/{{ .State.Status }}' | sort | tr '\n' ' ')"
for c in $restarts; do [[ $c == *=0/running ]] || fail "containers restarted or stopped: $restarts"; done
log "no container restarted: $restarts"

log "passed"
