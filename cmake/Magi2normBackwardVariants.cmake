# The backward's variant families (generators/magi2_norm_backward_generator.cpp), apart from the
# forward's (Magi2normVariants.cmake, which this needs): no tuning record tunes the backward, so
# neither its sources nor this file are part of the generator version a record names.

# magi2norm_add_backward_variants(BACKEND <cpu|opencl|cuda> TARGETS <halide targets...>
#                                 [COMPUTE_CAPABILITY <nn>] [PARAMS <generator params...>] [PTX]
#                                 [SINGLE_ROWS [STREAMING]])
# The backward's variants of one backend (generators/magi2_norm_backward_generator.cpp), one per
# (x, dy, dx) dtypes: dy in x's dtype or FP32 (the forward's output in the model: the input's
# dtype or FP32, SPEC.md's table), dx in any dtype; 15 variants instead of 27, as other dy dtypes
# have no forward that makes them. The family is named as magi2norm_add_variants names it (the
# backend, "cuda<nn>" for CUDA), plus "_single" for SINGLE_ROWS: variants whose dx rows are one
# dy row each (sums_rows=false), which the runtime picks for every call but singleton-head
# broadcasting; plus "_streaming" for STREAMING (x86 CPU targets, at least two): dx written with
# streaming stores, for rows of a multiple of abi::kStreamingLanes and dx aligned to
# MAGI2NORM_STREAMING_ALIGNMENT bytes (_magi2norm_backward_streaming_library). Appends to
# MAGI2NORM_VARIANT_OBJECTS, MAGI2NORM_VARIANT_TARGETS, MAGI2NORM_PTX_FILES (with PTX) and
# MAGI2NORM_BACKWARD_KERNEL_ENTRIES (one X-macro line per variant) in the caller's scope.
function(magi2norm_add_backward_variants)
    cmake_parse_arguments(PARSE_ARGV 0 ARG "PTX;SINGLE_ROWS;STREAMING" "BACKEND;COMPUTE_CAPABILITY" "TARGETS;PARAMS")
    if (NOT ARG_COMPUTE_CAPABILITY)
        set(ARG_COMPUTE_CAPABILITY 0)
    endif ()
    set(family ${ARG_BACKEND})
    if (ARG_BACKEND STREQUAL "cuda")
        set(family cuda${ARG_COMPUTE_CAPABILITY})
    endif ()
    set(sums_rows 1)
    if (ARG_SINGLE_ROWS)
        set(family ${family}_single)
        set(sums_rows 0)
        list(APPEND ARG_PARAMS sums_rows=false)
    endif ()
    set(alignment 0)
    if (ARG_STREAMING)
        if (NOT ARG_SINGLE_ROWS OR NOT ARG_BACKEND STREQUAL "cpu")
            message(FATAL_ERROR "magi2norm_add_backward_variants: STREAMING variants are CPU variants of SINGLE_ROWS")
        endif ()
        set(family ${family}_streaming)
        set(alignment ${MAGI2NORM_STREAMING_ALIGNMENT})
    endif ()
    set(device_code_args "")
    if (ARG_PTX)
        set(device_code_args DEVICE_CODE ptx_file)
    endif ()
    set(objects "")
    set(targets "")
    set(entries "")
    set(ptx_files "")
    foreach (in_type IN LISTS MAGI2NORM_DTYPES)
        set(dy_types ${in_type})
        if (NOT in_type STREQUAL "f32")
            list(APPEND dy_types f32)
        endif ()
        foreach (dy_type IN LISTS dy_types)
            foreach (dx_type IN LISTS MAGI2NORM_DTYPES)
                set(name "magi2_norm_backward_${family}_${in_type}_${dy_type}_${dx_type}")
                set(params in_type=${in_type} dy_type=${dy_type} dx_type=${dx_type} ${ARG_PARAMS})
                if (ARG_STREAMING)
                    _magi2norm_backward_streaming_library(${name} ${alignment} TARGETS ${ARG_TARGETS} PARAMS ${params})
                    list(APPEND objects ${MAGI2NORM_STREAMING_OBJECTS})
                else ()
                    add_halide_library(${name} FROM magi2norm.generator
                        ${device_code_args}
                        GENERATOR magi2_norm_backward
                        TARGETS ${ARG_TARGETS}
                        FEATURES ${MAGI2NORM_FEATURES}
                        USE_RUNTIME ${MAGI2NORM_RUNTIME}
                        PARAMS ${params})
                    _magi2norm_library_objects(${name} "${ARG_TARGETS}" objects)
                endif ()
                list(APPEND targets ${name})
                if (ARG_PTX)
                    list(APPEND ptx_files ${ptx_file})
                endif ()
                string(APPEND entries "MAGI2NORM_BACKWARD_KERNEL(${family}, ${ARG_BACKEND}, ${ARG_COMPUTE_CAPABILITY}, ${sums_rows}, ${alignment}, ${in_type}, ${dy_type}, ${dx_type})\n")
            endforeach ()
        endforeach ()
    endforeach ()
    set(MAGI2NORM_PTX_FILES ${MAGI2NORM_PTX_FILES} ${ptx_files} PARENT_SCOPE)
    set(MAGI2NORM_VARIANT_OBJECTS ${MAGI2NORM_VARIANT_OBJECTS} ${objects} PARENT_SCOPE)
    set(MAGI2NORM_VARIANT_TARGETS ${MAGI2NORM_VARIANT_TARGETS} ${targets} PARENT_SCOPE)
    set(MAGI2NORM_BACKWARD_KERNEL_ENTRIES "${MAGI2NORM_BACKWARD_KERNEL_ENTRIES}${entries}" PARENT_SCOPE)
endfunction()

# _magi2norm_backward_streaming_library(<name> <alignment> TARGETS <x86 targets...> PARAMS <generator params...>)
# One backward variant whose dx is written with streaming stores, made as the forward's
# (_magi2norm_streaming_library, Magi2normVariants.cmake): the generator writes each target's LLVM
# IR, cmake/streaming_stores.py marks dx's vector stores non-temporal and compiles it (no
# prefetches to rewrite: the backward issues none), and Halide's wrapper object picks the target
# at run time. Sets MAGI2NORM_STREAMING_OBJECTS; defines the target <name>.
function(_magi2norm_backward_streaming_library name alignment)
    cmake_parse_arguments(PARSE_ARGV 2 ARG "" "" "TARGETS;PARAMS")
    set(targets ${ARG_TARGETS})
    list(TRANSFORM targets APPEND "-${MAGI2NORM_FEATURES_JOINED}-no_runtime")
    set(outputs ${name}.h ${name}_wrapper.o)
    set(objects ${CMAKE_CURRENT_BINARY_DIR}/${name}_wrapper.o)
    foreach (t IN LISTS targets)
        list(APPEND outputs ${name}-${t}.o ${name}-${t}.ll)
        add_custom_command(OUTPUT ${name}-${t}.streaming.o
            COMMAND ${MAGI2NORM_PYTHON} ${PROJECT_SOURCE_DIR}/cmake/streaming_stores.py
                    --buffer dx --alignment ${alignment} ${name}-${t}.ll ${name}-${t}.streaming.o
            DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/${name}-${t}.ll ${PROJECT_SOURCE_DIR}/cmake/streaming_stores.py
                    ${MAGI2NORM_LLVMLITE_STAMP}
            VERBATIM)
        list(APPEND objects ${CMAKE_CURRENT_BINARY_DIR}/${name}-${t}.streaming.o)
    endforeach ()
    add_custom_command(OUTPUT ${outputs}
        COMMAND magi2norm.generator -n ${name} -g magi2_norm_backward -f ${name} -e c_header,object,llvm_assembly -o .
                "target=$<JOIN:${targets},$<COMMA>>" ${ARG_PARAMS} cpu_streaming_alignment=${alignment}
        DEPENDS magi2norm.generator
        VERBATIM)
    add_custom_target(${name} DEPENDS ${objects})
    set(MAGI2NORM_STREAMING_OBJECTS ${objects} PARENT_SCOPE)
endfunction()
