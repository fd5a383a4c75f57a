# Sanitizer and fuzzing builds of the runtime, tools, tuner and tests (scripts/test_asan.sh,
# scripts/test_tsan.sh, tests/fuzz). Included after generators/: the generator stays an ordinary
# program, and the variant objects it writes are linked as they are (no compiler sees them).
set(MAGI2NORM_SANITIZE "" CACHE STRING "Sanitizers for the runtime, tools and tests: address,undefined or thread")
option(MAGI2NORM_FUZZ "Build the libFuzzer targets of tests/fuzz (clang); the code they reach gets coverage instrumentation" OFF)

if (MAGI2NORM_SANITIZE)
    if (NOT MAGI2NORM_SANITIZE MATCHES "^(address|undefined|address,undefined|undefined,address|thread)$")
        message(FATAL_ERROR "MAGI2NORM_SANITIZE is address,undefined or thread, not '${MAGI2NORM_SANITIZE}'")
    endif ()
    add_compile_options(-fsanitize=${MAGI2NORM_SANITIZE} -fno-omit-frame-pointer -g)
    add_link_options(-fsanitize=${MAGI2NORM_SANITIZE})
    if (MAGI2NORM_SANITIZE MATCHES "undefined")
        # Every finding ends the process, so a test cannot pass past one.
        add_compile_options(-fno-sanitize-recover=all)
    endif ()
endif ()

if (MAGI2NORM_FUZZ)
    if (NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
        message(FATAL_ERROR "MAGI2NORM_FUZZ needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang")
    endif ()
    # Coverage feedback from everything a target reaches; only the targets link libFuzzer's main.
    add_compile_options(-fsanitize=fuzzer-no-link)
endif ()
