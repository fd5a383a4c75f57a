# magi2norm_machine_keys and magi2norm_this_machine (cmake/Magi2normMachine.cmake) on a made-up
# machine (machine/: two sockets of two cores of two threads, sysfs caches with an instruction
# cache among them); tests/tuning reads the same files with the tuner's parser. Run as
# cmake -DWORK_DIR=<dir> -P machine_keys_test.cmake.
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/Magi2normVariants.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/Magi2normMachine.cmake)

function(expect what found expected)
    if (NOT "${found}" STREQUAL "${expected}")
        message(SEND_ERROR "${what}: expected \"${expected}\", got \"${found}\"")
    endif ()
endfunction()

set(fixture ${CMAKE_CURRENT_LIST_DIR}/machine)
magi2norm_machine_keys(m CPUINFO ${fixture}/cpuinfo CACHE_DIR ${fixture}/cache)
expect(vendor "${m_vendor}" GenuineIntel)
expect(family "${m_family}" 6)
expect(model "${m_model}" 143)
expect(stepping "${m_stepping}" 8)
expect("cores (distinct physical id, core id)" "${m_cores}" 4)
expect("threads (processor entries)" "${m_threads}" 8)
expect("l2 (2048K)" "${m_l2}" 2097152)
expect("l3 (105M)" "${m_l3}" 110100480)

list(GET MAGI2NORM_X86_TARGETS 1 avx2)
magi2norm_this_machine(keys CPUINFO ${fixture}/cpuinfo CACHE_DIR ${fixture}/cache)
expect("the keys in the configure's order" "${keys}"
       "machine.vendor=GenuineIntel;machine.family=6;machine.model=143;machine.stepping=8;machine.cpu=Made-up Xeon @ 2.00GHz;machine.isa=${avx2};machine.cores=4;machine.threads=8;machine.caches.l2=2097152;machine.caches.l3=110100480")

# No core ids (some VMs): the cores are the threads; no cache folder: sizes 0; no cpuinfo at all:
# the unknowns.
file(WRITE ${WORK_DIR}/cpuinfo "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: Made-up EPYC\n\nprocessor\t: 1\n")
magi2norm_machine_keys(m CPUINFO ${WORK_DIR}/cpuinfo CACHE_DIR ${WORK_DIR}/no-such-folder)
expect("cores without core ids" "${m_cores}" 2)
expect("family without one" "${m_family}" -1)
expect("l3 without sysfs" "${m_l3}" 0)
magi2norm_machine_keys(m CPUINFO ${WORK_DIR}/no-such-file CACHE_DIR ${WORK_DIR}/no-such-folder)
expect("vendor without cpuinfo" "${m_vendor}" unknown)
expect("threads without cpuinfo" "${m_threads}" 1)
