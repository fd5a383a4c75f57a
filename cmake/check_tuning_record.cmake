# Whether a tuning record (docs/tuning_record.md) may set this build's schedules: its parameters
# were measured on one machine's code from one version of the generator and schedules, and on
# other code they are only guesses. The configure (runtime/CMakeLists.txt, MAGI2NORM_TUNING)
# calls magi2norm_check_tuning_record; the tests run this file as a script:
#   cmake -DRECORD=<record.json> -DEXPECT_GENERATOR_VERSION=<hex> -DEXPECT_CPU=<model name>
#         -DEXPECT_ISA=<halide target> [-DCPUINFO=<file>] [-DCACHE_DIR=<folder>]
#         [-DGPU_BACKENDS=<opencl;cuda>] [-DANY_MACHINE=ON] -P cmake/check_tuning_record.cmake
# (the other machine keys from CPUINFO and CACHE_DIR, by default this machine's).
include(${CMAKE_CURRENT_LIST_DIR}/Magi2normMachine.cmake)

# magi2norm_check_tuning_record(<record> <generator version> <any machine> <gpu backends> <machine keys>)
# Stops the configure (FATAL_ERROR) on the first thing that keeps the record from this build,
# naming it with what this build expected and what the record has: not a JSON object of format
# magi2norm-tuning/2 (a magi2norm-tuning/1 record, from before the machine keys and the
# confirmed picks, is refused as such), another generator_version, a backend this build
# compiles no variants for (cpu, or one of <gpu backends>), and then by backend:
# - cpu: unless <any machine> is true (a build for another machine), any member of <machine
#   keys> (a list of <member>=<value>, magi2norm_this_machine's) whose value the record does
#   not have;
# - cuda: no machine.gpu.compute_capability (a record whose candidates were not measured), or one
#   below 80 (the lowest the CUDA families compile for).
# A GPU record's machine is the GPU it was measured on, which a build machine seldom has: the
# build is for that GPU, and the configure names it.
function(magi2norm_check_tuning_record record version any_machine gpu_backends machine_keys)
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
    string(JSON format ERROR_VARIABLE error GET "${json}" format)
    if (format STREQUAL "magi2norm-tuning/1")
        message(FATAL_ERROR "tuning record ${record}: format is magi2norm-tuning/1, a record from before the machine keys "
                            "(vendor, family, model, stepping, cores, threads, L2 and L3 sizes) and the confirmed picks, "
                            "whose wins were never measured again: tune again (magi2-tune) for a magi2norm-tuning/2 record")
    endif ()
    _magi2norm_expect_member(format "magi2norm-tuning/2" "")
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
        foreach (key IN LISTS machine_keys)
            if (NOT key MATCHES "^([^=]+)=(.*)$")
                message(FATAL_ERROR "magi2norm_check_tuning_record: ${key} is no <member>=<value>")
            endif ()
            _magi2norm_expect_member(${CMAKE_MATCH_1} "${CMAKE_MATCH_2}" "${why}")
        endforeach ()
    endif ()
endfunction()

# The record's member <member> (dotted path) is <expected>, else FATAL_ERROR "<member> differs:
# expected ..., found ..." and <why>. Reads json and record of the calling function.
macro(_magi2norm_expect_member member expected why)
    set(_expected "${expected}")
    string(REPLACE "." ";" _path "${member}")
    string(JSON _found ERROR_VARIABLE _error GET "${json}" ${_path})
    if (_error)
        message(FATAL_ERROR "tuning record ${record}: ${member} is missing (${_error})")
    endif ()
    if (NOT _found STREQUAL _expected)
        message(FATAL_ERROR "tuning record ${record}: ${member} differs: expected \"${_expected}\", found \"${_found}\"${why}")
    endif ()
endmacro()

if (CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
    magi2norm_machine_keys(this CPUINFO "${CPUINFO}" CACHE_DIR "${CACHE_DIR}")
    set(keys "")
    foreach (member IN ITEMS vendor family model stepping)
        list(APPEND keys "machine.${member}=${this_${member}}")
    endforeach ()
    list(APPEND keys "machine.cpu=${EXPECT_CPU}" "machine.isa=${EXPECT_ISA}" "machine.cores=${this_cores}"
         "machine.threads=${this_threads}" "machine.caches.l2=${this_l2}" "machine.caches.l3=${this_l3}")
    magi2norm_check_tuning_record("${RECORD}" "${EXPECT_GENERATOR_VERSION}" "${ANY_MACHINE}" "${GPU_BACKENDS}" "${keys}")
    message(STATUS "tuning record ${RECORD}: accepted")
endif ()
