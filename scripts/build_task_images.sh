#!/usr/bin/env bash
# Guarantees: for every examples/tasks/<name>/ with a repo/ directory, the local
# image rollout-task-<name>:latest exists, built FROM rollout-base:bookworm,
# with the buggy tree at the task's workdir (the one line of <name>/workdir,
# default /workspace/repo) committed once as the git baseline (so `git diff`
# in the sandbox shows exactly the agent's changes). The commit's author and
# dates are fixed, so its sha is a function of the tree (SWE-bench rows name
# it as base_commit). Files under <name>/rootfs/ are copied to / first.
# A task with <name>/wheels.txt (pinned wheels, pip and setuptools among them)
# gets them at /opt/wheels, resolved once per content of that file with the
# host venv's `pip download --only-binary=:all:` into .cache/wheels/<name>/
# (setup time; no wheel is committed), and a venv /opt/venv (system site
# packages, pip installed from that wheelhouse); <name>/image_setup.sh, if
# any, runs last as root in the workdir (after the baseline commit).
# Each line of <name>/tags, if any, is a further name given to the image
# (a row that names its image by its project's naming rule finds it there).
# Idempotent: an image whose io.rollouts.task-hash label matches the hash of
# repo/ (plus wheels.txt, image_setup.sh and the wheels) and this Dockerfile
# is kept. Usage: build_task_images.sh [NAME...]
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TASKS=$REPO/examples/tasks
BASE=rollout-base:bookworm
WHEELS=$REPO/.cache/wheels

dockerfile() {  # dockerfile HASH TASK_DIR
  local workdir=/workspace/repo
  [[ -f $2/workdir ]] && workdir=$(<"$2/workdir")
  echo "FROM $BASE"
  echo "LABEL io.rollouts.task-hash=$1"
  [[ -d $2/rootfs ]] && echo "COPY rootfs/ /"
  if [[ -f $2/wheels.txt ]]; then
    cat <<'DOCKERFILE'
COPY wheels/ /opt/wheels/
RUN python3 -m venv --without-pip --system-site-packages /opt/venv \
 && /opt/venv/bin/python "$(ls /opt/wheels/pip-*.whl)/pip" install -q --no-index --find-links /opt/wheels pip
DOCKERFILE
  fi
  cat <<DOCKERFILE
COPY repo/ $workdir/
RUN cd $workdir \\
 && git init -q \\
 && git add -A \\
 && GIT_AUTHOR_DATE=2026-01-01T00:00:00Z GIT_COMMITTER_DATE=2026-01-01T00:00:00Z \\
    git -c user.name=rollout -c user.email=rollout@localhost commit -q -m baseline
WORKDIR $workdir
DOCKERFILE
  if [[ -f $2/image_setup.sh ]]; then
    echo "COPY image_setup.sh /tmp/image_setup.sh"
    echo "RUN bash /tmp/image_setup.sh && rm /tmp/image_setup.sh"
  fi
}

resolve_wheels() {  # resolve_wheels NAME: <name>/wheels.txt downloaded into .cache/wheels/<name>/, once per its content
  local list=$TASKS/$1/wheels.txt dir=$WHEELS/$1 stamp
  [[ -f $list ]] || return 0
  stamp=$(sha256sum <"$list" | cut -c1-16)
  if [[ -f $dir/.resolved && $(<"$dir/.resolved") == "$stamp" ]]; then return 0; fi
  echo "task wheels: pip download -r examples/tasks/$1/wheels.txt"
  rm -rf "$dir" && mkdir -p "$dir"
  "$REPO/.venv/bin/python" -m pip download -q --disable-pip-version-check --only-binary=:all: --no-deps -d "$dir" -r "$list"
  echo "$stamp" >"$dir/.resolved"
}

content_hash() {  # content_hash TASK_DIR: hash of repo/ (as .dockerignore filters it), the wheels and the Dockerfile
  local wheels
  wheels=$WHEELS/$(basename "$1")
  (cd "$1" && find repo rootfs .dockerignore wheels.txt image_setup.sh -type f ! -path '*/__pycache__/*' ! -path '*/.pytest_cache/*' \
    ! -path '*/.benchmarks/*' -print0 2>/dev/null | LC_ALL=C sort -z | xargs -0 sha256sum
    if [[ -f wheels.txt ]]; then (cd "$wheels" && find . -name '*.whl' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum); fi
    dockerfile "" "$1") \
    | sha256sum | cut -c1-16
}

tag_task() {  # tag_task NAME IMAGE: IMAGE also under each name in <name>/tags
  local tag
  [[ -f $TASKS/$1/tags ]] || return 0
  while read -r tag; do [[ -z $tag ]] || docker tag "$2" "$tag"; done <"$TASKS/$1/tags"
}

build_task() {  # build_task NAME
  local dir=$TASKS/$1 image=rollout-task-$1:latest hash have log context
  resolve_wheels "$1"
  hash=$(content_hash "$dir")
  have=$(docker image inspect -f '{{ index .Config.Labels "io.rollouts.task-hash" }}' "$image" 2>/dev/null || true)
  if [[ $have == "$hash" ]]; then echo "task image: $image up to date"; tag_task "$1" "$image"; return; fi
  echo "task image: building $image ($hash)"
  log=$(mktemp)
  context=$dir
  if [[ -f $dir/wheels.txt ]]; then  # the wheels live outside the task directory: build from a copy holding both
    context=$(mktemp -d)
    cp -a "$dir"/. "$context"/ && cp -a "$WHEELS/$1" "$context/wheels"
  fi
  # The engine has no buildx; the legacy builder is enough for COPY + RUN.
  if ! dockerfile "$hash" "$dir" | DOCKER_BUILDKIT=0 docker build -q -t "$image" -f - "$context" >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"; [[ $context == "$dir" ]] || rm -rf "$context"; return 1
  fi
  rm -f "$log"; [[ $context == "$dir" ]] || rm -rf "$context"
  tag_task "$1" "$image"
}

docker image inspect "$BASE" >/dev/null 2>&1 || { echo "missing $BASE: run scripts/build_base_image.sh" >&2; exit 1; }
if (($#)); then names=("$@"); else
  names=(); for d in "$TASKS"/*/repo; do names+=("$(basename "$(dirname "$d")")"); done
fi
for name in "${names[@]}"; do build_task "$name"; done
