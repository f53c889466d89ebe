#!/bin/sh
# A Mesos framework written with curl alone, speaking Mesos's v1 Scheduler HTTP API to a
# drfmesos master: it subscribes, launches one command task on its first offer,
# acknowledges the task's status updates, and tears itself down once the task finished.
#
#   MASTER=http://127.0.0.1:5050 AUTH=team-a:SECRET ROLE=team-a sh examples/mesos-curl.sh
#
# The event stream is RecordIO: each event is its length, a newline, and one line of JSON.
set -eu
MASTER=${MASTER:-http://127.0.0.1:5050}
API="$MASTER/api/v1/scheduler"
ROLE=${ROLE:-*}
WORK=$(mktemp -d)
STREAM=""
trap '[ -z "$STREAM" ] || kill "$STREAM" 2>/dev/null || true; rm -rf "$WORK"' EXIT
say() { echo "curl-framework: $*"; }
call() {  # a call on our stream: 202 when the master took it
  curl -sf -u "$AUTH" -H 'Content-Type: application/json' -H "Mesos-Stream-Id: $STREAM_ID" \
       -d "$1" "$API"
}
wait_for() {  # until the event stream holds $1 (a minute at most)
  for _ in $(seq 600); do grep -q "$1" "$WORK/events" && return 0; sleep 0.1; done
  say "no $1 in a minute"; exit 1
}
first() { grep -o "$1" "$WORK/events" | head -n 1 | sed 's/.*"value":"\([^"]*\)"/\1/'; }

# 1. SUBSCRIBE: the answer is the event stream, kept open
touch "$WORK/events"
curl -sN -u "$AUTH" -H 'Content-Type: application/json' -D "$WORK/headers" -o "$WORK/events" \
     -d '{"type": "SUBSCRIBE", "subscribe": {"framework_info":
          {"user": "", "name": "curl", "roles": ["'"$ROLE"'"]}}}' "$API" &
STREAM=$!
wait_for '"type":"SUBSCRIBED"'
STREAM_ID=$(sed -n 's/^Mesos-Stream-Id: *\([^[:space:]]*\).*/\1/ip' "$WORK/headers")
FRAMEWORK=$(first '"framework_id":{"value":"[^"]*"')
say "subscribed as $FRAMEWORK"

# 2. the first offer: launch one task on it
wait_for '"type":"OFFERS"'
OFFER=$(first '"offers":\[{"id":{"value":"[^"]*"')
AGENT=$(first '"agent_id":{"value":"[^"]*"')
call '{"type": "ACCEPT", "framework_id": {"value": "'"$FRAMEWORK"'"},
       "accept": {"offer_ids": [{"value": "'"$OFFER"'"}],
        "operations": [{"type": "LAUNCH", "launch": {"task_infos": [{
          "name": "hello", "task_id": {"value": "hello"}, "agent_id": {"value": "'"$AGENT"'"},
          "command": {"value": "echo hello from curl"},
          "resources": [{"name": "cpus", "type": "SCALAR", "scalar": {"value": 0.1}},
                        {"name": "mem", "type": "SCALAR", "scalar": {"value": 32}}]}]}}]}}'
say "launched task hello on $AGENT"

# 3. acknowledge every update until the task finished
acked=""
until grep -q '"state":"TASK_FINISHED"' "$WORK/events"; do
  for uuid in $(grep -o '"uuid":"[^"]*"' "$WORK/events" | sed 's/"uuid":"\(.*\)"/\1/'); do
    case " $acked " in *" $uuid "*) continue ;; esac
    call '{"type": "ACKNOWLEDGE", "framework_id": {"value": "'"$FRAMEWORK"'"},
           "acknowledge": {"agent_id": {"value": "'"$AGENT"'"},
                           "task_id": {"value": "hello"}, "uuid": "'"$uuid"'"}}'
    acked="$acked $uuid"
  done
  sleep 0.1
done
say "task hello: TASK_FINISHED"

# 4. TEARDOWN: the master forgets us and closes the stream
call '{"type": "TEARDOWN", "framework_id": {"value": "'"$FRAMEWORK"'"}}'
wait "$STREAM" || true
say "torn down"
