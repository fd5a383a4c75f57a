# Whether a tuning record (docs/tuning_record.md) may set this build's schedules: its parameters
# were measured on one machine's code from one version of the generator and schedules, and on
# other code they are only guesses. The configure (runtime/CMakeLists.txt, MAGI2NORM_TUNING)
# calls magi2norm_check_tuning_record; the tests run this file as a script:
#   cmake -DRECORD=<record.json> -DEXPECT_GENERATOR_VERSION=<hex> -DEXPECT_CPU=<model name>
#         -DEXPECT_ISA=<halide target> [-DGPU_BACKENDS=<opencl;cuda>] [-DANY_MACHINE=ON]
#         -P cmake/check_tuning_record.cmake

# magi2norm_check_tuning_record(<record> <generator version> <cpu> <isa> <any machine> <gpu backends>)
# Stops the configure (FATAL_ERROR) on the first thing that keeps the record from this build,
# naming it with what this build expected and what the record has: not a JSON object of format
# magi2norm-tuning/1, another generator_version, a backend this build compiles no variants for
# (cpu, or one of <gpu backends>), and then by backend:
# - cpu: unless <any machine> is true (a build for another machine), another machine.cpu or
#   machine.isa;
# - cuda: no machine.gpu.compute_capability (a record whose candidates were not measured), or one
#   below 80 (the lowest the CUDA families compile for).
# A GPU record's machine is the GPU it was measured on, which a build machine seldom has: the
# build is for that GPU, and the configure names it.
function(magi2norm_check_tuning_record record version cpu isa any_machine gpu_backends)
    if (NOT EXISTS "${record}")
        message(FATAL_ERROR "tuning record ${record}: no such file")
    endif ()
    file(READ "${record}" json)
    string(JSON type ERROR_VARIABLE error TYPE "${json}")
    if (error)
        message(FATAL_ERROR "tuning record ${record}: not JSON (${error})")
    elseif (NOT type STREQUAL "OBJECT")
        message(FATAL_ERROR "tuning record ${record}: not a JSON object")
    endif ()
    _magi2norm_expect_member(format "magi2norm-tuning/1" "")
    _magi2norm_expect_member(generator_version "${version}" " (measured on other generator or schedule sources: tune again)")
    string(JSON backend ERROR_VARIABLE error GET "${json}" backend)
    if (error)
        message(FATAL_ERROR "tuning record ${record}: backend is missing (${error})")
    endif ()
    if (NOT backend STREQUAL "cpu")
        if (NOT backend IN_LIST gpu_backends)
            list(JOIN gpu_backends ", " built)
            message(FATAL_ERROR "tuning record ${record}: backend ${backend}: this build compiles no ${backend} "
                                "variants (its GPU backends: ${built}; MAGI2NORM_OPENCL, MAGI2NORM_CUDA)")
        endif ()
        if (backend STREQUAL "cuda")
            string(JSON capability ERROR_VARIABLE error GET "${json}" machine gpu compute_capability)
            if (error OR NOT capability MATCHES "^[0-9]+$")
                message(FATAL_ERROR "tuning record ${record}: machine.gpu.compute_capability is missing "
                                    "(time the candidates on the GPU: magi2-tune-measure, then magi2-tune --select)")
            elseif (capability LESS 80)
                message(FATAL_ERROR "tuning record ${record}: machine.gpu.compute_capability is ${capability}, "
                                    "below 80, the lowest the CUDA families compile for")
            endif ()
        endif ()
        return()
    endif ()
    if (NOT any_machine)
        set(why " (measured on another machine: tune on this one, or build for that one with -DMAGI2NORM_TUNING_ANY_MACHINE=ON)")
        _magi2norm_expect_member(machine.cpu "${cpu}" "${why}")
        _magi2norm_expect_member(machine.isa "${isa}" "${why}")
    endif ()
endfunction()

# The record's member <member> (dotted path) is <expected>, else FATAL_ERROR "<member> differs:
# expected ..., found ..." and <why>. Reads json and record of the calling function.
macro(_magi2norm_expect_member member expected why)
    string(REPLACE "." ";" _path "${member}")
    string(JSON _found ERROR_VARIABLE _error GET "${json}" ${_path})
    if (_error)
        message(FATAL_ERROR "tuning record ${record}: ${member} is missing (${_error})")
    endif ()
    if (NOT _found STREQUAL "${expected}")
        message(FATAL_ERROR "tuning record ${record}: ${member} differs: expected \"${expected}\", found \"${_found}\"${why}")
    endif ()
endmacro()

if (CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
    magi2norm_check_tuning_record("${RECORD}" "${EXPECT_GENERATOR_VERSION}" "${EXPECT_CPU}" "${EXPECT_ISA}" "${ANY_MACHINE}"
                                  "${GPU_BACKENDS}")
    message(STATUS "tuning record ${RECORD}: accepted")
endif ()
