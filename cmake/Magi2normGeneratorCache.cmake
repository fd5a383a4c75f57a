# A cache of the generator's outputs shared by build folders (cmake/generator_cache.py): the
# plain, tuned and sanitizer builds of one checkout run the generator once for each variant they
# have in common instead of once each. scripts/build.sh and scripts/test_tuned.sh name
# .cache/generated; a plain configure names none.
set(MAGI2NORM_GENERATOR_CACHE "" CACHE PATH "Folder caching the generator's outputs for every build folder that names it (empty: no cache)")

# magi2norm_use_generator_cache(): the generator's runs among the calling directory's custom
# commands go through the cache, under a key of what a run's outputs are made from: the
# generator's sources (MAGI2NORM_GENERATOR_SOURCES, cmake/Magi2normVariants.cmake), the cache's
# script and Halide's version; the run's arguments complete the key (cmake/generator_cache.py).
# The steps after the generator (cmake/ir_steps.py) are not cached, so they are not in the key.
# Each of those files is a configure dependency, so the key is always the sources'.
function(magi2norm_use_generator_cache)
    if (NOT MAGI2NORM_GENERATOR_CACHE)
        return()
    endif ()
    find_package(Python3 REQUIRED COMPONENTS Interpreter)
    _magi2norm_sources_hash("${MAGI2NORM_GENERATOR_SOURCES}" version)
    set(script ${PROJECT_SOURCE_DIR}/cmake/generator_cache.py)
    file(SHA256 ${script} script_hash)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${script})
    string(SHA256 key "Halide ${Halide_VERSION}\nsources ${version}\n${script_hash}  cmake/generator_cache.py\n")
    set_property(DIRECTORY PROPERTY RULE_LAUNCH_CUSTOM
                 "\"${Python3_EXECUTABLE}\" \"${script}\" \"${MAGI2NORM_GENERATOR_CACHE}\" ${key}")
endfunction()
