#!/bin/sh
# Test launcher (CMake CROSSCOMPILING_EMULATOR of host-only test programs that link libraries the GPU machine lacks,
# such as OpenCV): runs the program, or, where the dynamic loader cannot find its shared libraries, reports one
# skipped test instead of failing. CTest uses it both for test discovery (--gtest_list_tests) and for the runs.
exe=$1
shift
missing=$(ldd "$exe" 2>/dev/null | awk '/not found/ {print $1}' | tr '\n' ' ')
if [ -n "$missing" ]; then
  for arg in "$@"; do
    if [ "$arg" = "--gtest_list_tests" ]; then
      printf 'SharedLibraries.\n  Missing\n'
      exit 0
    fi
  done
  echo "[  SKIPPED ] $(basename "$exe"): shared libraries not found here: $missing"
  exit 0
fi
exec "$exe" "$@"
