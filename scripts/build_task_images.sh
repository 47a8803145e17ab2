#!/usr/bin/env bash
# Guarantees: for every examples/tasks/<name>/ with a repo/ directory, the local
# image rollout-task-<name>:latest exists, built FROM rollout-base:bookworm,
# with the buggy tree at /workspace/repo committed once as the git baseline
# (so `git diff` in the sandbox shows exactly the agent's changes).
# Idempotent: an image whose io.rollouts.task-hash label matches the hash of
# repo/ plus this Dockerfile is kept. Usage: build_task_images.sh [NAME...]
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TASKS=$REPO/examples/tasks
BASE=rollout-base:bookworm

dockerfile() {  # dockerfile HASH
  cat <<DOCKERFILE
FROM $BASE
LABEL io.rollouts.task-hash=$1
COPY repo/ /workspace/repo/
RUN cd /workspace/repo \\
 && git init -q \\
 && git add -A \\
 && git -c user.name=rollout -c user.email=rollout@localhost commit -q -m baseline
WORKDIR /workspace/repo
DOCKERFILE
}

content_hash() {  # content_hash TASK_DIR: hash of repo/ (as .dockerignore filters it) and the Dockerfile
  (cd "$1" && find repo .dockerignore -type f ! -path '*/__pycache__/*' ! -path '*/.pytest_cache/*' \
    ! -path '*/.benchmarks/*' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum; dockerfile "") \
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
  if ! dockerfile "$hash" | DOCKER_BUILDKIT=0 docker build -q -t "$image" -f - "$dir" >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"; return 1
  fi
  rm -f "$log"
}

docker image inspect "$BASE" >/dev/null 2>&1 || { echo "missing $BASE: run scripts/build_base_image.sh" >&2; exit 1; }
if (($#)); then names=("$@"); else
  names=(); for d in "$TASKS"/*/repo; do names+=("$(basename "$(dirname "$d")")"); done
fi
for name in "${names[@]}"; do build_task "$name"; done
