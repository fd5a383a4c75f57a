# Sourced by the sanitizer and fuzzing scripts: the clang they build with and how the sanitizers
# report. Every finding ends the process with a failure status, so no test passes past one.
# clang 15 is the first of Debian 12's with x86 _Float16, which tests/reference uses.
SANITIZE_CONFIG=(-DCMAKE_C_COMPILER=clang-15 -DCMAKE_CXX_COMPILER=clang++-15
                 -DMAGI2NORM_OPENCL=OFF -DMAGI2NORM_CUDA=OFF -DMAGI2NORM_ARM64=OFF -DMAGI2NORM_BUILD_TUNER=OFF)
# The ASan + UBSan build, which also holds the fuzz targets (scripts/test_asan.sh, scripts/fuzz.sh).
ASAN_CONFIG=("${SANITIZE_CONFIG[@]}" -DMAGI2NORM_SANITIZE=address,undefined -DMAGI2NORM_FUZZ=ON -DMAGI2NORM_BUILD_TESTS=ON)
ASAN_BUILD_DIR=${ASAN_BUILD_DIR:-build-asan}
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=0:detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp"
export ASAN_SYMBOLIZER_PATH=/usr/bin/llvm-symbolizer-15
