# AOT variants of the norm: one Halide library per (device family, input dtype, output dtype),
# each from the same generator, all sharing one Halide runtime. The generated objects are
# collected so that the magi2norm static library can carry them (and the runtime) inside it.

set(MAGI2NORM_DTYPES f32 bf16 f16)

# Halide target features common to every variant:
#   large_buffers: tensors over 2 GiB (the model's reach several GiB);
#   no_asserts, no_bounds_query: the runtime checks every view, grouping and pointer before a
#                 call (runtime/src/views/views.cpp, call/call_plan.cpp) and never asks a variant for its
#                 bounds, so the generated checks and the bounds arithmetic (integer divisions)
#                 that a call would compute first are dropped;
#   strict_float: no fast-math rewriting, so NaN/Inf propagate as SPEC.md says and the FP32
#                 result is the formula's, rounding step by rounding step;
#   user_context: every call carries the runtime's per-call state (the caller's CUDA context
#                 and stream) to Halide's runtime hooks.
set(MAGI2NORM_FEATURES large_buffers no_asserts no_bounds_query strict_float user_context)
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
# The AVX-512 BF16 variants' one target (NATIVE_BF16 families): Zen 4's ISA, whose BF16
# conversion encodes the output. Not part of the multi-target objects: Halide 21's run-time check
# knows no BF16 feature (it would pick this code on any AVX-512 IFMA CPU), so the runtime takes
# these variants only where CPUID shows every feature of the target (runtime/src/variants/isa.cpp).
set(MAGI2NORM_X86_BF16_TARGET x86-64-linux-avx-avx2-avx512-avx512_skylake-avx512_cannonlake-avx512_zen4-f16c-fma-sse41)

# The source tree, found from this file so that `cmake -P` scripts may include it too.
get_filename_component(_magi2norm_source_dir ${CMAKE_CURRENT_LIST_DIR} DIRECTORY)

# The knobs' defaults, read from their one declaration, the tuning space in schedules/: the
# variants' from schedules/knobs.def, the runtime's from schedules/runtime_knobs.def. For a knob
# "<scope>_<name>", MAGI2NORM_KNOB_DEFAULT_<scope>_<name> (scope cpu, gpu, cpu_backward or runtime), and the
# names of each scope's knobs in MAGI2NORM_KNOBS_<scope>.
set(MAGI2NORM_KNOBS_cpu "")
set(MAGI2NORM_KNOBS_gpu "")
set(MAGI2NORM_KNOBS_cpu_backward "")
set(MAGI2NORM_KNOBS_runtime "")
foreach (_magi2norm_knob_file IN ITEMS schedules/knobs.def schedules/runtime_knobs.def)
    file(STRINGS ${_magi2norm_source_dir}/${_magi2norm_knob_file} _magi2norm_knob_lines REGEX "^MAGI2NORM_(CPU|GPU|CPU_BACKWARD|RUNTIME)_KNOB\\(")
    foreach (line IN LISTS _magi2norm_knob_lines)
        if (NOT line MATCHES "^MAGI2NORM_(CPU|GPU|CPU_BACKWARD|RUNTIME)_KNOB\\(([a-z_]+), ([0-9]+),")
            message(FATAL_ERROR "${_magi2norm_knob_file}: cannot read the knob line: ${line}")
        endif ()
        string(TOLOWER ${CMAKE_MATCH_1} scope)
        set(MAGI2NORM_KNOB_DEFAULT_${scope}_${CMAKE_MATCH_2} ${CMAKE_MATCH_3})
        list(APPEND MAGI2NORM_KNOBS_${scope} ${CMAKE_MATCH_2})
    endforeach ()
endforeach ()

# magi2norm_knob_value(<knob> <params> <out>): the value of knob <knob> (e.g. cpu_chunk_bytes) in
# the generator parameters <params> (name=value entries), else its default.
function(magi2norm_knob_value knob params out)
    set(value ${MAGI2NORM_KNOB_DEFAULT_${knob}})
    foreach (p IN LISTS params)
        if (p MATCHES "^${knob}=(.*)$")
            set(value ${CMAKE_MATCH_1})
        endif ()
    endforeach ()
    set(${out} ${value} PARENT_SCOPE)
endfunction()

# The files the variants are made from, each named once: the generator's sources (its build,
# generators/CMakeLists.txt, compiles the .cpp files), the shared ABI and knobs, the
# streaming-store step and this file (the target features and the families). The configure
# refuses a file in abi/, generators/ or schedules/ that this list lacks, so none is left out of
# the version below.
set(MAGI2NORM_GENERATOR_SOURCES
    abi/backward_abi.h
    abi/kernel_abi.h
    generators/cuda_rounding.h
    generators/float_codecs.h
    generators/magi2_mhc_logits_backward_generator.cpp
    generators/magi2_mhc_logits_generator.cpp
    generators/magi2_norm_backward_generator.cpp
    generators/magi2_norm_generator.cpp
    generators/norm_pieces.h
    schedules/backward_stages.h
    schedules/cpu_backward_schedule.cpp
    schedules/cpu_backward_schedule.h
    schedules/cpu_mhc_logits_backward_schedule.cpp
    schedules/cpu_mhc_logits_backward_schedule.h
    schedules/cpu_mhc_logits_schedule.cpp
    schedules/cpu_mhc_logits_schedule.h
    schedules/cpu_schedule.cpp
    schedules/cpu_schedule.h
    schedules/gpu_backward_schedule.cpp
    schedules/gpu_backward_schedule.h
    schedules/gpu_row_sum.cpp
    schedules/gpu_row_sum.h
    schedules/gpu_schedule.cpp
    schedules/gpu_schedule.h
    schedules/knobs.def
    schedules/knobs.h
    schedules/mhc_logits_stages.h
    schedules/norm_stages.h)
set(MAGI2NORM_VERSION_SOURCES ${MAGI2NORM_GENERATOR_SOURCES} cmake/ir_steps.py cmake/Magi2normVariants.cmake)

# magi2norm_generator_version(<out>): what a tuning record was measured on, as far as the
# sources go: the SHA-256 (hex) of a manifest of
# MAGI2NORM_VERSION_SOURCES, one line "<file's SHA-256>  <path from the source root>" a file, in
# byte order of the paths: sha256sum's format, so `sha256sum <those files> | sha256sum` gives it
# too. Any change to them may change what a schedule parameter does, so a record made before it
# is refused (check_tuning_record.cmake). In a configure (not a `cmake -P` script) the files
# become configure dependencies of the calling directory, so an edit of any of them computes the
# version again: a build never carries an older one.
function(magi2norm_generator_version out)
    _magi2norm_sources_hash("${MAGI2NORM_VERSION_SOURCES}" version)
    set(${out} ${version} PARENT_SCOPE)
endfunction()

# _magi2norm_sources_hash(<files> <out>): the manifest hash above of <files> (paths from the
# source root), which become configure dependencies; checks that MAGI2NORM_GENERATOR_SOURCES
# names every file of abi/, generators/ and schedules/ but their CMake and the runtime's knobs.
function(_magi2norm_sources_hash files out)
    get_filename_component(root ${CMAKE_CURRENT_FUNCTION_LIST_DIR} DIRECTORY)
    file(GLOB_RECURSE present LIST_DIRECTORIES false RELATIVE ${root} ${root}/abi/* ${root}/generators/* ${root}/schedules/*)
    list(FILTER present EXCLUDE REGEX "(^|/)(\\.|__pycache__/)|CMakeLists.txt$")
    # The runtime's knobs: constants of the runtime, which no generator reads.
    list(REMOVE_ITEM present schedules/runtime_knobs.def)
    list(REMOVE_ITEM present ${MAGI2NORM_GENERATOR_SOURCES})
    if (present)
        message(FATAL_ERROR "cmake/Magi2normVariants.cmake: MAGI2NORM_GENERATOR_SOURCES lacks ${present}")
    endif ()
    list(SORT files)
    set(manifest "")
    foreach (f IN LISTS files)
        file(SHA256 ${root}/${f} hash)
        string(APPEND manifest "${hash}  ${f}\n")
    endforeach ()
    string(SHA256 hash "${manifest}")
    set(${out} ${hash} PARENT_SCOPE)
    if (NOT CMAKE_SCRIPT_MODE_FILE)
        list(TRANSFORM files PREPEND ${root}/)
        set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${files})
    endif ()
endfunction()

# magi2norm_machine_cpu(<out> [<cpuinfo>]): this machine's CPU as a tuning record names it: the
# value of the first "model name" line of /proc/cpuinfo (or of the file <cpuinfo>, for tests),
# from its first non-blank character after the colon to the end of the line; "unknown" without one.
function(magi2norm_machine_cpu out)
    set(cpuinfo /proc/cpuinfo)
    if (ARGC GREATER 1)
        set(cpuinfo ${ARGV1})
    endif ()
    set(cpu unknown)
    if (EXISTS ${cpuinfo})
        file(STRINGS ${cpuinfo} lines REGEX "^model name[ \t]*:" LIMIT_COUNT 1)
        if (lines MATCHES "^model name[ \t]*:[ \t]*(.*)$")
            set(cpu "${CMAKE_MATCH_1}")
        endif ()
    endif ()
    set(${out} "${cpu}" PARENT_SCOPE)
endfunction()

# magi2norm_machine_isa(<out> [<cpuinfo>]): the Halide target of the CPU variants' code that runs
# on this machine, as their multi-target objects pick it at run time: the first of
# MAGI2NORM_X86_TARGETS whose every feature the first "flags" line of /proc/cpuinfo (or of the
# file <cpuinfo>) shows, else the last (the fallback, taken untested); "unknown" without one. Each feature's flags are those
# Halide's runtime tests (its x86_cpu_features.cpp), which grants AVX2 and AVX-512 only with
# AVX, F16C and RDRAND as well.
function(magi2norm_machine_isa out)
    set(flags_sse41 sse4_1)
    set(flags_avx avx)
    set(flags_f16c f16c)
    set(flags_fma fma)
    set(flags_avx2 avx f16c rdrand avx2)
    set(flags_avx512 avx f16c rdrand avx512f avx512cd)
    set(flags_avx512_skylake avx f16c rdrand avx512f avx512cd avx512vl avx512bw avx512dq)
    set(cpuinfo /proc/cpuinfo)
    if (ARGC GREATER 1)
        set(cpuinfo ${ARGV1})
    endif ()
    set(${out} unknown PARENT_SCOPE)
    if (NOT EXISTS ${cpuinfo})
        return()
    endif ()
    file(STRINGS ${cpuinfo} line REGEX "^flags[ \t]*:" LIMIT_COUNT 1)
    if (NOT line)
        return()
    endif ()
    string(REGEX REPLACE "^flags[ \t]*:[ \t]*" "" line "${line}")
    string(REGEX REPLACE "[ \t]+" ";" have "${line}")
    foreach (target IN LISTS MAGI2NORM_X86_TARGETS)
        set(isa ${target})
        # x86-64-linux-<features>: the features follow the architecture, bits and OS.
        string(REPLACE "-" ";" features ${target})
        list(SUBLIST features 3 -1 features)
        set(runs ON)
        foreach (feature IN LISTS features)
            if (NOT DEFINED flags_${feature})
                message(FATAL_ERROR "magi2norm_machine_isa: no /proc/cpuinfo flags known for the Halide feature ${feature} of ${target}")
            endif ()
            foreach (flag IN LISTS flags_${feature})
                if (NOT flag IN_LIST have)
                    set(runs OFF)
                endif ()
            endforeach ()
        endforeach ()
        if (runs)
            break()
        endif ()
    endforeach ()
    set(${out} ${isa} PARENT_SCOPE)
endfunction()

# _magi2norm_library_objects(<name> <targets> <list>): appends to the variable <list> the object
# files add_halide_library makes for library <name> over the Halide targets <targets>: one a
# target and the wrapper that picks among them, or one object for one target.
function(_magi2norm_library_objects name targets list_var)
    set(files ${${list_var}})
    list(LENGTH targets n)
    if (n GREATER 1)
        foreach (t IN LISTS targets)
            list(APPEND files "${CMAKE_CURRENT_BINARY_DIR}/${name}-${t}-${MAGI2NORM_FEATURES_JOINED}-no_runtime.o")
        endforeach ()
        list(APPEND files "${CMAKE_CURRENT_BINARY_DIR}/${name}_wrapper.o")
    else ()
        list(APPEND files "${CMAKE_CURRENT_BINARY_DIR}/${name}.o")
    endif ()
    set(${list_var} ${files} PARENT_SCOPE)
endfunction()

# magi2norm_add_variants(BACKEND <cpu|opencl|cuda> TARGETS <halide targets...> [FAMILY <name>]
#                        [FORM <form>] [STORES streaming] [NATIVE_BF16] [COMPUTE_CAPABILITY <nn>]
#                        [DTYPES <in> <out>] [CLASS <n> <dim_min> <dim_max> <bytes_min> <bytes_max>]
#                        [PARAMS <generator params...>] [CROSS <runtime>] [PTX])
# One variant family, forward or backward, described once: its variants and their lines in the
# runtime's one table (runtime/src/variants/kernels.cpp). FORM names the algorithm's form:
# - forward (generator magi2_norm, one variant per (x, y) dtype pair, or the one pair DTYPES):
#   elements (default); paired_words, BF16 -> BF16 over 32-bit words of two elements
#   (define_paired_words), family "_paired"; one_row, calls of one dense row, family "_row";
#   inverse_rms, the training form that also writes each row's inverse RMS, family
#   "_inverse_rms";
# - backward (generator magi2_norm_backward, one variant per (x, dy, dx) dtypes: dy in x's dtype
#   or FP32, the forward's outputs in the model (SPEC.md), dx in any; 15 variants, not 27):
#   backward, whose dx rows may add several dy rows (singleton-head broadcasting); backward_single,
#   one dy row a dx row (sums_rows=false, every other call), family "_single";
# - mhc_logits (generator magi2_mhc_logits, one variant per x dtype, the logits FP32): the mHC
#   norm fused with its product with phi (SPEC.md, "The mHC logits"), family "_mhc_logits";
#   mhc_logits_backward (generator magi2_mhc_logits_backward), its dy and dphi, family
#   "_mhc_logits_backward"; CPU only so far.
# The family is named FAMILY (default: the backend, "cuda<nn>" for CUDA), plus "_t<n>" for class
# n of a tuning record and "_streaming" for outputs (the forward's y, the backward's dx) written
# with streaming stores in pieces of MAGI2NORM_STREAMING_ALIGNMENT bytes, the output aligned to
# it (x86 targets, at least two; _magi2norm_ir_library). NATIVE_BF16 (the CPU element form, BF16 outputs only, on
# MAGI2NORM_X86_BF16_TARGET) encodes BF16 with the AVX-512 BF16 conversion (native_bf16, through
# cmake/ir_steps.py --native-bf16), family "_avx512bf16", taken only on CPUs with that ISA.
# COMPUTE_CAPABILITY (CUDA) is the lowest device capability,
# times 10, that the variants run on. A CLASS family serves the calls of its dtypes (DTYPES: the
# forward's x and y, or the backward's x, dy and dx) whose D is in [dim_min, dim_max] and whose
# bytes (every input and output element's: x and y, or x, dy and dx) are in [bytes_min,
# bytes_max]; the others serve every call of their kind (class 0).
# Appends to MAGI2NORM_VARIANT_OBJECTS (objects to archive), MAGI2NORM_VARIANT_TARGETS (their
# build targets) and MAGI2NORM_VARIANT_ENTRIES (one X-macro line per variant), in the caller's
# scope. With CROSS, the variants are for another machine: static libraries using that runtime,
# listed in MAGI2NORM_CROSS_TARGETS only (built and checked, not linked into this machine's
# library). With PTX (CUDA targets), each variant also writes its PTX, listed in
# MAGI2NORM_PTX_FILES.
function(magi2norm_add_variants)
    cmake_parse_arguments(PARSE_ARGV 0 ARG "PTX;NATIVE_BF16" "FAMILY;BACKEND;FORM;STORES;COMPUTE_CAPABILITY;CROSS" "TARGETS;PARAMS;DTYPES;CLASS")
    if (NOT ARG_COMPUTE_CAPABILITY)
        set(ARG_COMPUTE_CAPABILITY 0)
    endif ()
    if (NOT ARG_FAMILY)
        set(ARG_FAMILY ${ARG_BACKEND})
        if (ARG_BACKEND STREQUAL "cuda")
            set(ARG_FAMILY cuda${ARG_COMPUTE_CAPABILITY})
        endif ()
    endif ()
    if (NOT ARG_FORM)
        set(ARG_FORM elements)
    endif ()
    set(alignment 0)
    if (ARG_STORES STREQUAL "streaming")
        set(alignment ${MAGI2NORM_STREAMING_ALIGNMENT})
    elseif (ARG_STORES AND NOT ARG_STORES STREQUAL "ordinary")
        message(FATAL_ERROR "magi2norm_add_variants: STORES is ordinary or streaming, not ${ARG_STORES}")
    endif ()
    set(runtime ${MAGI2NORM_RUNTIME})
    if (ARG_CROSS)
        set(runtime ${ARG_CROSS})
    endif ()
    set(family ${ARG_FAMILY})
    # The class and its bounds, as the table's columns: class 0 serves every call of its kind.
    set(class "0, 0, 9223372036854775807, 0, 9223372036854775807")
    if (ARG_CLASS)
        list(LENGTH ARG_CLASS n)
        if (NOT n EQUAL 5 OR NOT ARG_DTYPES)
            message(FATAL_ERROR "magi2norm_add_variants: CLASS is <n> <dim_min> <dim_max> <bytes_min> <bytes_max>, with DTYPES, not ${ARG_CLASS}")
        endif ()
        list(GET ARG_CLASS 0 n)
        set(family ${family}_t${n})
        list(JOIN ARG_CLASS ", " class)
    endif ()
    # The dtypes, as in_y_dx: the forward's x and y (dx is x, unused), the backward's x, dy, dx.
    set(dtypes "")
    set(generator magi2_norm)  # the generator, whose name begins each variant's
    if (ARG_FORM MATCHES "^mhc_logits")
        set(generator magi2_${ARG_FORM})
        foreach (in_type IN LISTS MAGI2NORM_DTYPES)
            list(APPEND dtypes ${in_type}_f32_${in_type})
        endforeach ()
    elseif (ARG_FORM MATCHES "^backward")
        set(generator magi2_norm_backward)
        foreach (in_type IN LISTS MAGI2NORM_DTYPES)
            set(dy_types ${in_type})
            if (NOT in_type STREQUAL "f32")
                list(APPEND dy_types f32)
            endif ()
            foreach (dy_type IN LISTS dy_types)
                foreach (dx_type IN LISTS MAGI2NORM_DTYPES)
                    list(APPEND dtypes ${in_type}_${dy_type}_${dx_type})
                endforeach ()
            endforeach ()
        endforeach ()
    else ()
        foreach (in_type IN LISTS MAGI2NORM_DTYPES)
            foreach (out_type IN LISTS MAGI2NORM_DTYPES)
                list(APPEND dtypes ${in_type}_${out_type}_${in_type})
            endforeach ()
        endforeach ()
    endif ()
    if (ARG_DTYPES)
        # The forward's pair, its table entry's dx the input's dtype (unused); the backward's triple.
        list(JOIN ARG_DTYPES _ chosen)
        if (NOT ARG_FORM MATCHES "^backward")
            list(GET ARG_DTYPES 0 in_type)
            set(chosen ${chosen}_${in_type})
        endif ()
        if (NOT chosen IN_LIST dtypes)
            message(FATAL_ERROR "magi2norm_add_variants: DTYPES is one forward pair or backward triple of ${MAGI2NORM_DTYPES} this form has, not ${ARG_DTYPES}")
        endif ()
        set(dtypes ${chosen})
    endif ()
    if (ARG_FORM STREQUAL "paired_words")
        set(family ${family}_paired)
        list(FILTER dtypes INCLUDE REGEX "^bf16_bf16_")
        list(APPEND ARG_PARAMS paired_words=true)
    elseif (ARG_FORM STREQUAL "one_row")
        if (alignment OR NOT ARG_BACKEND STREQUAL "cpu")
            message(FATAL_ERROR "magi2norm_add_variants: the one_row form is a CPU form with ordinary stores")
        endif ()
        set(family ${family}_row)
        list(APPEND ARG_PARAMS one_row=true)
    elseif (ARG_FORM STREQUAL "inverse_rms")
        if (alignment)
            message(FATAL_ERROR "magi2norm_add_variants: the inverse_rms form has ordinary stores")
        endif ()
        set(family ${family}_inverse_rms)
        list(APPEND ARG_PARAMS writes_inverse_rms=true)
    elseif (ARG_FORM STREQUAL "backward_single")
        set(family ${family}_single)
        list(APPEND ARG_PARAMS sums_rows=false)
    elseif (ARG_FORM STREQUAL "backward")
        if (alignment)
            message(FATAL_ERROR "magi2norm_add_variants: streaming backward variants are of the backward_single form")
        endif ()
    elseif (ARG_FORM MATCHES "^mhc_logits")
        if (alignment OR NOT ARG_BACKEND STREQUAL "cpu")
            message(FATAL_ERROR "magi2norm_add_variants: the ${ARG_FORM} form is a CPU form with ordinary stores")
        endif ()
        set(family ${family}_${ARG_FORM})
    elseif (NOT ARG_FORM STREQUAL "elements")
        message(FATAL_ERROR "magi2norm_add_variants: FORM is elements, paired_words, one_row, inverse_rms, backward, backward_single, mhc_logits or mhc_logits_backward, not ${ARG_FORM}")
    endif ()
    set(isa any)
    if (ARG_NATIVE_BF16)
        if (NOT ARG_BACKEND STREQUAL "cpu" OR NOT ARG_FORM STREQUAL "elements")
            message(FATAL_ERROR "magi2norm_add_variants: NATIVE_BF16 variants are of the CPU element form")
        endif ()
        set(family ${family}_avx512bf16)
        list(FILTER dtypes INCLUDE REGEX "^[a-z0-9]+_bf16_")
        list(APPEND ARG_PARAMS native_bf16=true)
        set(isa avx512_bf16)
    endif ()
    if (alignment)
        set(family ${family}_streaming)
    endif ()
    set(objects "")
    set(targets "")
    set(entries "")
    set(ptx_files "")
    foreach (triple IN LISTS dtypes)
        string(REPLACE "_" ";" triple ${triple})
        list(GET triple 0 in_type)
        list(GET triple 1 out_type)
        list(GET triple 2 dx_type)
        if (generator STREQUAL "magi2_norm")
            set(name "${generator}_${family}_${in_type}_${out_type}")
            set(params in_type=${in_type} out_type=${out_type} ${ARG_PARAMS})
        elseif (generator MATCHES "^magi2_mhc_logits")
            set(name "magi2_norm_${family}_${in_type}")
            set(params in_type=${in_type} ${ARG_PARAMS})
        else ()
            set(name "${generator}_${family}_${in_type}_${out_type}_${dx_type}")
            set(params in_type=${in_type} dy_type=${out_type} dx_type=${dx_type} ${ARG_PARAMS})
        endif ()
        set(device_code_args "")
        if (ARG_PTX)
            set(device_code_args DEVICE_CODE ptx_file)
        endif ()
        if (alignment OR ARG_NATIVE_BF16)
            _magi2norm_ir_library(${name} ${generator} ${alignment} ${ARG_NATIVE_BF16} TARGETS ${ARG_TARGETS} PARAMS ${params})
            list(APPEND objects ${MAGI2NORM_IR_OBJECTS})
        else ()
            add_halide_library(${name} FROM magi2norm.generator
                ${device_code_args}
                GENERATOR ${generator}
                TARGETS ${ARG_TARGETS}
                FEATURES ${MAGI2NORM_FEATURES}
                USE_RUNTIME ${runtime}
                PARAMS ${params})
            _magi2norm_library_objects(${name} "${ARG_TARGETS}" objects)
        endif ()
        list(APPEND targets ${name})
        if (ARG_PTX)
            list(APPEND ptx_files ${ptx_file})
        endif ()
        string(APPEND entries "MAGI2NORM_VARIANT(${name}, ${ARG_BACKEND}, ${ARG_COMPUTE_CAPABILITY}, ${ARG_FORM}, ${alignment}, ${isa}, ${in_type}, ${out_type}, ${dx_type}, ${class})\n")
    endforeach ()
    if (ARG_CROSS)
        set(MAGI2NORM_CROSS_TARGETS ${MAGI2NORM_CROSS_TARGETS} ${targets} PARENT_SCOPE)
        return()
    endif ()
    set(MAGI2NORM_PTX_FILES ${MAGI2NORM_PTX_FILES} ${ptx_files} PARENT_SCOPE)
    set(MAGI2NORM_VARIANT_OBJECTS ${MAGI2NORM_VARIANT_OBJECTS} ${objects} PARENT_SCOPE)
    set(MAGI2NORM_VARIANT_TARGETS ${MAGI2NORM_VARIANT_TARGETS} ${targets} PARENT_SCOPE)
    set(MAGI2NORM_VARIANT_ENTRIES "${MAGI2NORM_VARIANT_ENTRIES}${entries}" PARENT_SCOPE)
endfunction()

# _magi2norm_ir_library(<name> <generator> <alignment> <native_bf16> TARGETS <x86 targets...> PARAMS <generator params...>)
# A variant like add_halide_library's made through cmake/ir_steps.py: the generator writes each
# target's LLVM IR beside its object, and the step compiles that IR instead, after its rewrites
# (Halide 21 has no directive for them): with <alignment> > 0 (cpu_streaming_alignment) the
# output's (the forward's y, the backward's dx) vector stores become non-temporal and the
# forward's prefetches L2 prefetches (the backward issues none); with <native_bf16> true the
# BF16 encoder calls become the native conversion. With two or more targets Halide's wrapper
# object picks among them at run time as usual. Sets MAGI2NORM_IR_OBJECTS (the objects to
# archive); defines the target <name>.
function(_magi2norm_ir_library name generator alignment native_bf16)
    cmake_parse_arguments(PARSE_ARGV 4 ARG "" "" "TARGETS;PARAMS")
    set(step_args "")
    if (alignment)
        set(step_args --buffer norm --alignment ${alignment} --prefetch-into-l2)
        if (generator STREQUAL "magi2_norm_backward")
            set(step_args --buffer dx --alignment ${alignment})
        endif ()
    endif ()
    if (native_bf16)
        list(APPEND step_args --native-bf16)
    endif ()
    set(targets ${ARG_TARGETS})
    list(TRANSFORM targets APPEND "-${MAGI2NORM_FEATURES_JOINED}-no_runtime")
    list(LENGTH targets num_targets)
    set(generated ${name}.h)
    set(objects "")
    # One target: its object and IR are <name>.o / .ll; several: <name>-<target>.o / .ll each,
    # and the wrapper that picks one. Halide's own objects are written too (a run must write
    # objects) but not archived.
    set(stems ${name})
    if (num_targets GREATER 1)
        list(APPEND generated ${name}_wrapper.o)
        list(APPEND objects ${CMAKE_CURRENT_BINARY_DIR}/${name}_wrapper.o)
        list(TRANSFORM targets PREPEND "${name}-" OUTPUT_VARIABLE stems)
    endif ()
    foreach (stem IN LISTS stems)
        list(APPEND generated ${stem}.o ${stem}.ll)
        add_custom_command(OUTPUT ${stem}.ir.o
            COMMAND ${MAGI2NORM_PYTHON} ${PROJECT_SOURCE_DIR}/cmake/ir_steps.py ${step_args} ${stem}.ll ${stem}.ir.o
            DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/${stem}.ll ${PROJECT_SOURCE_DIR}/cmake/ir_steps.py
                    ${MAGI2NORM_LLVMLITE_STAMP}
            VERBATIM)
        list(APPEND objects ${CMAKE_CURRENT_BINARY_DIR}/${stem}.ir.o)
    endforeach ()
    add_custom_command(OUTPUT ${generated}
        COMMAND magi2norm.generator -n ${name} -g ${generator} -f ${name} -e c_header,object,llvm_assembly -o .
                "target=$<JOIN:${targets},$<COMMA>>" ${ARG_PARAMS} cpu_streaming_alignment=${alignment}
        DEPENDS magi2norm.generator
        VERBATIM)
    add_custom_target(${name} DEPENDS ${objects})
    set(MAGI2NORM_IR_OBJECTS ${objects} PARENT_SCOPE)
endfunction()
