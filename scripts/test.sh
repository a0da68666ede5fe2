#!/usr/bin/env bash
# Every test: install what is missing, build in Release, run ctest; then build the BAL
# reader's tests with AddressSanitizer/UBSan and run them over the malformed-file corpus,
# and replay every fuzz target's committed corpus (tests/fuzz/corpus/) under them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/setup.sh"
tiepoint_install_packages
tiepoint_build
export TIEPOINT_SHARED_DATA=${TIEPOINT_SHARED_DATA:-$root/../shared/data}
[ -d "$TIEPOINT_SHARED_DATA" ] || echo "note: $TIEPOINT_SHARED_DATA absent: real-data tests will skip"

# Sanitizer build of the reader and the CLI, without CUDA (host code only). Unoptimized
# with line tables only (-O0 -g1): stack traces still name file and line, and it compiles
# in a fifth of -O2 -g's time (a 2-core VM: 11 min against 55; homography.cc alone 60 s
# against 235 s), while the sanitized tests below run in about 15 s either way.
asan=$root/build-asan
cmake -S "$root" -B "$asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTIEPOINT_WITH_CUDA=OFF \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O0 -g1 -DNDEBUG" -DTIEPOINT_ASAN=ON >/dev/null
cmake --build "$asan" -j "${JOBS:-$(nproc)}" --target bal_test ply_test malformed_inputs_test fuzz_replays tiepoint -- --no-print-directory \
  >/dev/null 2>"$asan/build.log" || { cat "$asan/build.log"; exit 1; }
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
"$asan/tests/bal_test" --gtest_brief=1
"$asan/tests/ply_test" --gtest_brief=1
"$asan/tests/malformed_inputs_test" --gtest_brief=1
(cd "$asan" && ctest --output-on-failure -j 2 -R '^(cli\.(malformed|unreadable)|fuzz\.replay)')
unset ASAN_OPTIONS UBSAN_OPTIONS

cd "$root/build"
ctest --output-on-failure -j "${JOBS:-$(nproc)}" -LE slow
