# AOT variants of the norm: one Halide library per (device family, input dtype, output dtype),
# each from the same generator, all sharing one Halide runtime. The generated objects are
# collected so that the magi2norm static library can carry them (and the runtime) inside it.

set(MAGI2NORM_DTYPES f32 bf16 f16)

# Halide target features common to every variant:
#   large_buffers: tensors over 2 GiB (the model's reach several GiB);
#   strict_float: no fast-math rewriting, so NaN/Inf propagate as SPEC.md says and the FP32
#                 result is the formula's, rounding step by rounding step;
#   user_context: every call carries the runtime's per-call state (the caller's CUDA context
#                 and stream) to Halide's runtime hooks.
set(MAGI2NORM_FEATURES large_buffers strict_float user_context)
list(JOIN MAGI2NORM_FEATURES "-" MAGI2NORM_FEATURES_JOINED)

set(MAGI2NORM_RUNTIME magi2norm_halide_runtime)

# CPU variants: one multi-target object per dtype pair; Halide's runtime picks AVX-512, AVX2 or
# SSE4.1 code from what the CPU reports (the last target is the fallback). Not Halide's `host`:
# its compile-time detection goes by the CPU model, and on a VM that hides AVX-512 from a Zen 4
# (cpuid leaf 7 without avx512f, XCR0 = 7) it still asks for AVX-512, whose code then faults.
set(MAGI2NORM_X86_TARGETS
    x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41
    x86-64-linux-avx-avx2-f16c-fma-sse41
    x86-64-linux-sse41)

# magi2norm_add_variants(FAMILY <name> TARGETS <halide targets...> [PARAMS <generator params...>]
#                        [BACKEND <cpu|opencl|cuda>] [COMPUTE_CAPABILITY <nn>] [CROSS <runtime>] [PTX]
#                        [STREAM_ALIGNMENT <bytes>] [PAIRED_WORDS])
# BACKEND defaults to FAMILY; COMPUTE_CAPABILITY (CUDA) is the lowest device capability, times
# 10, that the variants run on. STREAM_ALIGNMENT (x86 CPU targets, at least two) makes the
# variants that write their output with streaming stores, for outputs aligned to that many bytes
# (_magi2norm_streaming_library). PAIRED_WORDS makes the paired-word form of BF16 -> BF16 only
# (generators/magi2_norm_generator.cpp, define_paired_words).
# Appends to MAGI2NORM_VARIANT_OBJECTS (objects to archive), MAGI2NORM_VARIANT_TARGETS (their
# build targets) and MAGI2NORM_KERNEL_ENTRIES (one X-macro line per variant), in the caller's scope.
# With CROSS, the variants are for another machine: static libraries using that runtime, listed
# in MAGI2NORM_CROSS_TARGETS only (built and checked, not linked into this machine's library).
# With PTX (CUDA targets), each variant also writes its PTX, listed in MAGI2NORM_PTX_FILES.
function(magi2norm_add_variants)
    cmake_parse_arguments(PARSE_ARGV 0 ARG "PTX;PAIRED_WORDS" "FAMILY;CROSS;BACKEND;COMPUTE_CAPABILITY;STREAM_ALIGNMENT" "TARGETS;PARAMS")
    if (NOT ARG_BACKEND)
        set(ARG_BACKEND ${ARG_FAMILY})
    endif ()
    if (NOT ARG_COMPUTE_CAPABILITY)
        set(ARG_COMPUTE_CAPABILITY 0)
    endif ()
    if (NOT ARG_STREAM_ALIGNMENT)
        set(ARG_STREAM_ALIGNMENT 0)
    endif ()
    set(runtime ${MAGI2NORM_RUNTIME})
    if (ARG_CROSS)
        set(runtime ${ARG_CROSS})
    endif ()
    set(objects "")
    set(targets "")
    set(entries "")
    set(ptx_files "")
    list(LENGTH ARG_TARGETS num_targets)
    set(dtypes ${MAGI2NORM_DTYPES})
    set(paired 0)
    if (ARG_PAIRED_WORDS)
        set(dtypes bf16)
        set(paired 1)
        list(APPEND ARG_PARAMS paired_words=true)
    endif ()
    foreach (in_type IN LISTS dtypes)
        foreach (out_type IN LISTS dtypes)
            set(name "magi2_norm_${ARG_FAMILY}_${in_type}_${out_type}")
            set(device_code_args "")
            if (ARG_PTX)
                set(device_code_args DEVICE_CODE ptx_file)
            endif ()
            set(params in_type=${in_type} out_type=${out_type} ${ARG_PARAMS})
            if (ARG_STREAM_ALIGNMENT)
                _magi2norm_streaming_library(${name} ${ARG_STREAM_ALIGNMENT} TARGETS ${ARG_TARGETS} PARAMS ${params})
                list(APPEND objects ${MAGI2NORM_STREAMING_OBJECTS})
            else ()
                add_halide_library(${name} FROM magi2norm.generator
                    ${device_code_args}
                    GENERATOR magi2_norm
                    TARGETS ${ARG_TARGETS}
                    FEATURES ${MAGI2NORM_FEATURES}
                    USE_RUNTIME ${runtime}
                    PARAMS ${params})
                if (num_targets GREATER 1)
                    foreach (t IN LISTS ARG_TARGETS)
                        list(APPEND objects "${CMAKE_CURRENT_BINARY_DIR}/${name}-${t}-${MAGI2NORM_FEATURES_JOINED}-no_runtime.o")
                    endforeach ()
                    list(APPEND objects "${CMAKE_CURRENT_BINARY_DIR}/${name}_wrapper.o")
                else ()
                    list(APPEND objects "${CMAKE_CURRENT_BINARY_DIR}/${name}.o")
                endif ()
            endif ()
            list(APPEND targets ${name})
            if (ARG_PTX)
                list(APPEND ptx_files ${ptx_file})
            endif ()
            string(APPEND entries "MAGI2NORM_KERNEL(${ARG_FAMILY}, ${ARG_BACKEND}, ${ARG_COMPUTE_CAPABILITY}, ${ARG_STREAM_ALIGNMENT}, ${paired}, ${in_type}, ${out_type})\n")
        endforeach ()
    endforeach ()
    if (ARG_CROSS)
        set(MAGI2NORM_CROSS_TARGETS ${MAGI2NORM_CROSS_TARGETS} ${targets} PARENT_SCOPE)
        return()
    endif ()
    set(MAGI2NORM_PTX_FILES ${MAGI2NORM_PTX_FILES} ${ptx_files} PARENT_SCOPE)
    set(MAGI2NORM_VARIANT_OBJECTS ${MAGI2NORM_VARIANT_OBJECTS} ${objects} PARENT_SCOPE)
    set(MAGI2NORM_VARIANT_TARGETS ${MAGI2NORM_VARIANT_TARGETS} ${targets} PARENT_SCOPE)
    set(MAGI2NORM_KERNEL_ENTRIES "${MAGI2NORM_KERNEL_ENTRIES}${entries}" PARENT_SCOPE)
endfunction()

# _magi2norm_streaming_library(<name> <alignment> TARGETS <x86 targets...> PARAMS <generator params...>)
# A multi-target variant like add_halide_library's, whose output is written with streaming
# stores: the generator (cpu_streaming_alignment=<alignment>) writes each target's LLVM IR beside
# its object, cmake/streaming_stores.py marks the output's vector stores non-temporal, turns its
# prefetches into L2 prefetches and compiles that IR instead (Halide 21 has no directive for
# either), and Halide's wrapper object picks among the targets at run time as usual. Sets
# MAGI2NORM_STREAMING_OBJECTS (the objects to archive); defines the target <name>.
function(_magi2norm_streaming_library name alignment)
    cmake_parse_arguments(PARSE_ARGV 2 ARG "" "" "TARGETS;PARAMS")
    list(LENGTH ARG_TARGETS num_targets)
    if (num_targets LESS 2)
        message(FATAL_ERROR "${name}: streaming-store variants are built for two or more targets")
    endif ()
    set(targets ${ARG_TARGETS})
    list(TRANSFORM targets APPEND "-${MAGI2NORM_FEATURES_JOINED}-no_runtime")
    set(generated ${name}.h ${name}_wrapper.o)
    set(objects ${CMAKE_CURRENT_BINARY_DIR}/${name}_wrapper.o)
    foreach (t IN LISTS targets)
        # Halide's own object of each target is written too (a multi-target run must write
        # objects) but not archived.
        list(APPEND generated ${name}-${t}.o ${name}-${t}.ll)
        add_custom_command(OUTPUT ${name}-${t}.streaming.o
            COMMAND ${MAGI2NORM_PYTHON} ${PROJECT_SOURCE_DIR}/cmake/streaming_stores.py
                    --buffer norm --alignment ${alignment} --prefetch-into-l2 ${name}-${t}.ll ${name}-${t}.streaming.o
            DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/${name}-${t}.ll ${PROJECT_SOURCE_DIR}/cmake/streaming_stores.py
                    ${MAGI2NORM_LLVMLITE_STAMP}
            VERBATIM)
        list(APPEND objects ${CMAKE_CURRENT_BINARY_DIR}/${name}-${t}.streaming.o)
    endforeach ()
    add_custom_command(OUTPUT ${generated}
        COMMAND magi2norm.generator -n ${name} -g magi2_norm -f ${name} -e c_header,object,llvm_assembly -o .
                "target=$<JOIN:${targets},$<COMMA>>" ${ARG_PARAMS} cpu_streaming_alignment=${alignment}
        DEPENDS magi2norm.generator
        VERBATIM)
    add_custom_target(${name} DEPENDS ${objects})
    set(MAGI2NORM_STREAMING_OBJECTS ${objects} PARENT_SCOPE)
endfunction()
