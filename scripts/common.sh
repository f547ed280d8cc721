# Shared by demo.sh and test.sh: install what is missing (Debian packages), check the CUDA toolkit, configure.
# Sourced, not run.

CONVEYOR_PACKAGES=(cmake g++ ninja-build pkg-config libcli11-dev libfmt-dev nlohmann-json3-dev zlib1g-dev libpng-dev
  libgtest-dev libgmock-dev libbenchmark-dev libgraphviz-dev graphviz dataset-fashion-mnist libeigen3-dev
  libjpeg-dev libzstd-dev libopencv-dev python3-matplotlib doxygen libopenmpi-dev openmpi-bin clang-format chromium)

conveyor_install_missing() {
  local missing=()
  for p in "${CONVEYOR_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "conveyor: installing missing Debian packages: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
  fi
  # lizard (PyPI) measures function size and complexity for the Code.* test.
  if ! python3 -m lizard --version >/dev/null 2>&1; then
    echo "conveyor: installing lizard (pip) for the function-size test"
    python3 -m pip install --quiet --disable-pip-version-check lizard >/dev/null 2>&1 ||
      echo "conveyor: pip could not install lizard: the Code.* tests will fail" >&2
  fi
  local nvcc="${CUDACXX:-/usr/local/cuda/bin/nvcc}"
  if ! [ -x "$nvcc" ] && ! command -v nvcc >/dev/null; then
    echo "conveyor: the CUDA Toolkit (>= 12.4, nvcc) is required; install it in /usr/local/cuda or set CUDACXX" >&2
    return 1
  fi
  [ -x "$nvcc" ] && export CUDACXX="$nvcc"
  return 0
}

# conveyor_configure <build-dir> [extra cmake args...]
conveyor_configure() {
  local dir=$1
  shift
  cmake -S "$CONVEYOR_ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
}
