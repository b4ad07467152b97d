#!/usr/bin/env bash
# Installs what the contract tests need on a machine without a GPU:
# - tests/engines/test_contract_sglang.py: SGLang 0.5.23's own argument parser and resolution,
#   adaptive router and OpenAI protocol models;
# - tests/engines/oracle/: SGLang's own serving stack (its FastAPI http_server app, the OpenAI
#   serving classes, the TokenizerManager and the detokenizer process) with a stand-in
#   scheduler in place of the GPU side.
#
# The full sglang dependency set is GPU kernels and a CUDA torch (several GB). The contract
# tests need only the Python those paths import, so:
#   1. sglang==0.5.23 with --no-deps;
#   2. the CPU build of torch 2.13.0 (a local wheel on specbench's machines) plus the light
#      packages that sglang's server_args / arg_groups / openai.protocol and its HTTP server
#      import, found by importing them until nothing was missing; versions are sglang's own
#      pins where it has them. torchvision is imported but unused there: the tests stub it.
# The plan is checked with `pip install --dry-run --report` before anything is installed, so a
# CUDA torch (or any nvidia-* package) is refused instead of downloaded.
#
# Usage: scripts/install_sglang_contract.sh            (into `python`)
#        PYTHON=/path/to/venv/bin/python scripts/install_sglang_contract.sh
#        COMPILE=0 ...: no bytecode at install time, for a machine that writes it on first import
#        (CI does): compiling all of torch and transformers costs more CPU (24 of 47 CPU-s here)
#        than compiling the part the tests import.
set -euo pipefail

PYTHON="${PYTHON:-python}"
SGLANG_VERSION="0.5.23"

PACKAGES=(
  "torch==2.13.0"             # the CPU build; sglang pins 2.14.1 (CUDA), resolution does not care
  "triton==3.8.0"             # imported by sglang.srt.utils.common (and then by torch's dynamo)
  # sglang's own pins
  "transformers==5.19.0"
  "tokenizers==0.23.2"
  "sentencepiece==0.2.1"
  "compressed-tensors==0.18.0"
  "apache-tvm-ffi==0.1.11"
  "openai==2.8.0"
  # unpinned in sglang; pinned here to the versions the contract tests were made with
  "gguf==0.19.0"
  "msgspec==0.23.0"
  "psutil==7.2.2"
  "pybase64==1.5.1"
  "starlette==1.10.0"
  "tqdm==4.70.1"
  "dill==0.4.1"
  # what the HTTP server (entrypoints/http_server.py and what it imports) needs on top;
  # xgrammar, soundfile: sglang's pins
  "xgrammar==0.2.7"
  "soundfile==0.13.1"
  "fastapi==0.165.0"
  "uvicorn==0.54.0"
  "uvloop==0.23.0"
  "prometheus-client==0.26.0"
  "partial-json-parser==0.2.1.1.post7"
  "python-multipart==0.0.34"
  "setproctitle==1.3.8"
  "einops==0.8.2"
  # usually present already (specbench's own or the machine's packages)
  "orjson"
  "pillow"
  "pyzmq"
  "ipython"
  "aiohttp"
  "jsonschema"
)

start_s=$(date +%s)
pip_() { "$PYTHON" -m pip --disable-pip-version-check "$@"; }
no_compile=()
if [ "${COMPILE:-1}" = 0 ]; then no_compile=(--no-compile); fi

report="$(mktemp)"
trap 'rm -f "$report"' EXIT
pip_ install --quiet --dry-run --report "$report" "${PACKAGES[@]}"
"$PYTHON" - "$report" <<'EOF'
import json, sys

report = json.load(open(sys.argv[1]))
bad = []
for item in report["install"]:
    name = item["metadata"]["name"].lower()
    version = item["metadata"]["version"]
    url = item.get("download_info", {}).get("url", "")
    if name.startswith("nvidia-") or name.startswith("cuda-"):
        bad.append(f"{name}=={version}")
    if name == "torch" and "+cpu" not in version and "cpu" not in url:
        bad.append(f"torch=={version} from {url} (not the CPU build)")
if bad:
    sys.exit("install_sglang_contract: refusing a CUDA install: " + ", ".join(bad)
             + "; put the CPU torch 2.13.0 wheel where pip finds it (--find-links)")
EOF

pip_ install --quiet ${no_compile[@]+"${no_compile[@]}"} "${PACKAGES[@]}"
# last and alone: --no-deps keeps its GPU dependency set (and pip's complaints about it) out
pip_ install --quiet ${no_compile[@]+"${no_compile[@]}"} --no-deps "sglang==${SGLANG_VERSION}"

"$PYTHON" - <<'EOF'
import importlib.metadata as m
import torch

assert torch.version.cuda is None, f"a CUDA torch got installed ({torch.__version__})"
cuda = [d.metadata["Name"] for d in m.distributions() if d.metadata["Name"].lower().startswith("nvidia-")]
assert not cuda, f"CUDA packages got installed: {cuda}"
print(f"sglang {m.version('sglang')}, torch {torch.__version__} (CPU)")
EOF
echo "install_sglang_contract: done in $(( $(date +%s) - start_s )) s"
