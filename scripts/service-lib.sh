# Shared by the scripts that run one background service on loopback (kafka.sh, chroma.sh):
# a PID file, waiting for readiness, stopping, status. Sourced, never run.
#
# The sourcing script sets: name (what the logs call the service, e.g. "broker"), port,
# pid_file, log_file, and defines log() and ready() (exit 0 once the service answers).

running_pid() {
  [ -f "$pid_file" ] || return 1
  local pid
  pid=$(cat "$pid_file")
  kill -0 "$pid" 2>/dev/null || return 1
  echo "$pid"
}

# Record the PID of the process just started in the background ($!) and wait up to 60 s
# for it to answer; a process that exits meanwhile is reported with its last log lines.
await_started() {
  echo "$1" >"$pid_file"
  for _ in $(seq 1 120); do
    if ! running_pid >/dev/null; then
      log "$name exited during start-up; last lines of $log_file:"
      tail -n 30 "$log_file" >&2
      exit 1
    fi
    if ready; then
      log "$name ready on 127.0.0.1:$port (pid $1)"
      return 0
    fi
    sleep 0.5
  done
  log "$name did not answer within 60 s; see $log_file"
  exit 1
}

# Stop the recorded process: SIGTERM, then SIGKILL after $1 seconds.
stop_service() {
  local grace=$1 pid
  if ! pid=$(running_pid); then
    log "not running on port $port"
    rm -f "$pid_file"
    return 0
  fi
  log "stopping $name (pid $pid)"
  kill "$pid"
  for _ in $(seq 1 $((grace * 4))); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$pid_file"; return 0; }
    sleep 0.25
  done
  log "$name did not stop within $grace s; killing it"
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$pid_file"
}

# Exit 0 when the recorded process runs and answers.
service_status() {
  local pid
  if pid=$(running_pid) && ready; then
    echo "running (pid $pid) on 127.0.0.1:$port"
  else
    echo "not running on 127.0.0.1:$port"
    return 1
  fi
}

# Exit early from start when the service already runs.
already_running() {
  local pid
  pid=$(running_pid) || return 1
  log "already running (pid $pid) on 127.0.0.1:$port"
}

# Refuse to start when one of the given ports already answers: another process (a service
# started from another checkout, say) holds it, and the new one would die on a bind error.
refuse_taken_ports() {
  local taken
  for taken in "$@"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$taken") 2>/dev/null; then
      log "cannot start the $name: 127.0.0.1:$taken is already in use by a process this" \
        "checkout did not start (a $name from another checkout?). Stop it, or pick other" \
        "ports (see the environment variables at the top of $0)."
      exit 1
    fi
  done
}
