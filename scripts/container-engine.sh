# The container engine the image and cluster scripts use; sourced, never run.
#
# podman where it is installed (with runc when present: crun fails on some sandboxes' cgroups,
# and with docker/podman/containers.conf unless CONTAINERS_CONF names another), else docker.
# Sets: engine (the command, an array), engine_name (podman|docker). Fails when neither exists.
# CONTAINER_ENGINE=docker|podman picks one.

container_engine_pick() {
  local repo_dir=$1 wanted=${CONTAINER_ENGINE:-}
  if [ -z "$wanted" ]; then
    if command -v podman >/dev/null; then wanted=podman
    elif command -v docker >/dev/null; then wanted=docker
    else
      echo "no container engine: install podman (apt-get install podman runc) or docker" >&2
      return 1
    fi
  fi
  engine_name=$wanted
  engine=("$wanted")
  if [ "$wanted" = podman ]; then
    export CONTAINERS_CONF=${CONTAINERS_CONF:-$repo_dir/docker/podman/containers.conf}
    if command -v runc >/dev/null; then engine+=(--runtime runc); fi
  fi
}
