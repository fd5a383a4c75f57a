# Checks that every cross-compiled arm-64-linux variant library holds AArch64 code and defines
# its entry point. Run as: cmake -DLIBS="a.a,b.a" -DREADELF=readelf -P check_arm64.cmake
string(REPLACE "," ";" LIBS "${LIBS}")
foreach (lib IN LISTS LIBS)
    if (NOT EXISTS "${lib}")
        message(FATAL_ERROR "missing ${lib}")
    endif ()
    execute_process(COMMAND ${READELF} -W -h -s "${lib}" OUTPUT_VARIABLE out RESULT_VARIABLE rc)
    get_filename_component(name "${lib}" NAME_WE)
    if (NOT rc EQUAL 0 OR NOT out MATCHES "Machine: +AArch64" OR NOT out MATCHES "FUNC +GLOBAL +DEFAULT +[0-9]+ ${name}\n")
        message(FATAL_ERROR "${lib}: not an AArch64 library defining ${name}")
    endif ()
    message(STATUS "${name}: AArch64, defines ${name}")
endforeach ()
