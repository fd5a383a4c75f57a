# A cache of the generator's outputs shared by build folders (cmake/generator_cache.py): the
# plain, tuned and sanitizer builds of one checkout run the generator once for each variant they
# have in common instead of once each. scripts/build.sh and scripts/test_tuned.sh name
# .cache/generated; a plain configure names none.
set(MAGI2NORM_GENERATOR_CACHE "" CACHE PATH "Folder caching the generator's outputs for every build folder that names it (empty: no cache)")

# magi2norm_use_generator_cache(): the generator's runs among the calling directory's custom
# commands go through the cache, under a key of the sources they are made from: those of a
# tuning record's generator version (magi2norm_generator_version), the backward's and its CMake,
# the cache's script and Halide's version. Each of those files is a configure dependency, so the
# key is always the sources'.
function(magi2norm_use_generator_cache)
    if (NOT MAGI2NORM_GENERATOR_CACHE)
        return()
    endif ()
    find_package(Python3 REQUIRED COMPONENTS Interpreter)
    magi2norm_generator_version(forward)
    file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE ${PROJECT_SOURCE_DIR}
         ${PROJECT_SOURCE_DIR}/abi/*backward* ${PROJECT_SOURCE_DIR}/generators/*backward* ${PROJECT_SOURCE_DIR}/schedules/*backward*)
    list(APPEND files cmake/Magi2normBackwardVariants.cmake cmake/generator_cache.py)
    list(SORT files)
    set(manifest "Halide ${Halide_VERSION}\nforward ${forward}\n")
    foreach (f IN LISTS files)
        file(SHA256 ${PROJECT_SOURCE_DIR}/${f} hash)
        string(APPEND manifest "${hash}  ${f}\n")
    endforeach ()
    list(TRANSFORM files PREPEND ${PROJECT_SOURCE_DIR}/)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${files})
    string(SHA256 key "${manifest}")
    set_property(DIRECTORY PROPERTY RULE_LAUNCH_CUSTOM
                 "\"${Python3_EXECUTABLE}\" \"${PROJECT_SOURCE_DIR}/cmake/generator_cache.py\" \"${MAGI2NORM_GENERATOR_CACHE}\" ${key}")
endfunction()
