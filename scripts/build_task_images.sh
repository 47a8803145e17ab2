#!/usr/bin/env bash
# Guarantees: for every examples/tasks/<name>/ with a repo/ directory, the local
# image rollout-task-<name>:latest exists, built FROM rollout-base:bookworm,
# with the buggy tree at the task's workdir (the one line of <name>/workdir,
# default /workspace/repo) committed once as the git baseline (so `git diff`
# in the sandbox shows exactly the agent's changes). The commit's author and
# dates are fixed, so its sha is a function of the tree (SWE-bench rows name
# it as base_commit). Files under <name>/rootfs/ are copied to / first.
# Idempotent: an image whose io.rollouts.task-hash label matches the hash of
# repo/ plus this Dockerfile is kept. Usage: build_task_images.sh [NAME...]
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TASKS=$REPO/examples/tasks
BASE=rollout-base:bookworm

dockerfile() {  # dockerfile HASH TASK_DIR
  local workdir=/workspace/repo
  [[ -f $2/workdir ]] && workdir=$(<"$2/workdir")
  echo "FROM $BASE"
  echo "LABEL io.rollouts.task-hash=$1"
  [[ -d $2/rootfs ]] && echo "COPY rootfs/ /"
  cat <<DOCKERFILE
COPY repo/ $workdir/
RUN cd $workdir \\
 && git init -q \\
 && git add -A \\
 && GIT_AUTHOR_DATE=2026-01-01T00:00:00Z GIT_COMMITTER_DATE=2026-01-01T00:00:00Z \\
    git -c user.name=rollout -c user.email=rollout@localhost commit -q -m baseline
WORKDIR $workdir
DOCKERFILE
}

content_hash() {  # content_hash TASK_DIR: hash of repo/ (as .dockerignore filters it) and the Dockerfile
  (cd "$1" && find repo rootfs .dockerignore -type f ! -path '*/__pycache__/*' ! -path '*/.pytest_cache/*' \
    ! -path '*/.benchmarks/*' -print0 2>/dev/null | LC_ALL=C sort -z | xargs -0 sha256sum; dockerfile "" "$1") \
    | sha256sum | cut -c1-16
}

build_task() {  # build_task NAME
  local dir=$TASKS/$1 image=rollout-task-$1:latest hash have log
  hash=$(content_hash "$dir")
  have=$(docker image inspect -f '{{ index .Config.Labels "io.rollouts.task-hash" }}' "$image" 2>/dev/null || true)
  if [[ $have == "$hash" ]]; then echo "task image: $image up to date"; return; fi
  echo "task image: building $image ($hash)"
  log=$(mktemp)
  # The engine has no buildx; the legacy builder is enough for COPY + RUN.
  if ! dockerfile "$hash" "$dir" | DOCKER_BUILDKIT=0 docker build -q -t "$image" -f - "$dir" >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"; return 1
  fi
  rm -f "$log"
}

docker image inspect "$BASE" >/dev/null 2>&1 || { echo "missing $BASE: run scripts/build_base_image.sh" >&2; exit 1; }
if (($#)); then names=("$@"); else
  names=(); for d in "$TASKS"/*/repo; do names+=("$(basename "$(dirname "$d")")"); done
fi
for name in "${names[@]}"; do build_task "$name"; done
