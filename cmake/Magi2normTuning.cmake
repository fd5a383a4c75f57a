# What tuning records (MAGI2NORM_TUNING, docs/tuning_record.md) set in a build: the runtime's
# knobs (from the CPU record), and the schedule parameters of each significant class of calls of
# each record's backend, which runtime/CMakeLists.txt turns into class variant families. Without
# a record: knobs.def's defaults and no classes. Needs Magi2normVariants.cmake (the knobs and this
# build's identity).
include(${CMAKE_CURRENT_LIST_DIR}/check_tuning_record.cmake)

# magi2norm_tuning(RECORDS <files...> ANY_MACHINE <bool> GPU_BACKENDS <backends...>
#                  CPU_PARAMS <generator params...> CPU_BACKWARD_PARAMS <generator params...>
#                  GPU_PARAMS <generator params...>)
# Checks each record against this build (magi2norm_check_tuning_record; at most one record a
# backend) and sets, in the caller's scope:
#   MAGI2NORM_RUNTIME_KNOB_<name>         every runtime knob of knobs.def: the CPU record's value, else the default
#   MAGI2NORM_TUNING_CLASSES              1 .. n, the records' significant classes in their order
#   MAGI2NORM_TUNING_CLASS_<n>_BACKEND    cpu, opencl or cuda
#   MAGI2NORM_TUNING_CLASS_<n>_CAPABILITY cuda: the compute capability x 10 its code is for (80 or 86)
#   MAGI2NORM_TUNING_CLASS_<n>_PASS       forward or backward (CPU records only)
#   MAGI2NORM_TUNING_CLASS_<n>_DTYPES     <in> <out>, or the backward's <x> <dy> <dx>
#   MAGI2NORM_TUNING_CLASS_<n>_BOUNDS     <dim_min> <dim_max> <bytes_min> <bytes_max>
#   MAGI2NORM_TUNING_CLASS_<n>_PARAMS     CPU_PARAMS (CPU_BACKWARD_PARAMS for a backward class, GPU_PARAMS
#                                         for a GPU class) with the class's in place of theirs
# A record member the build reads but cannot use (an unknown knob, a bound that is no int64, a
# dtype outside MAGI2NORM_DTYPES) stops the configure; members it does not read are ignored.
function(magi2norm_tuning)
    cmake_parse_arguments(PARSE_ARGV 0 ARG "" "ANY_MACHINE" "RECORDS;GPU_BACKENDS;CPU_PARAMS;CPU_BACKWARD_PARAMS;GPU_PARAMS")
    foreach (knob IN LISTS MAGI2NORM_KNOBS_runtime)
        set(MAGI2NORM_RUNTIME_KNOB_${knob} ${MAGI2NORM_KNOB_DEFAULT_runtime_${knob}} PARENT_SCOPE)
    endforeach ()
    set(classes "")
    set(n 0)
    set(backends_seen "")
    if (ARG_RECORDS)
        # A change to a record or to the sources it was measured on configures again (and checks again).
        magi2norm_generator_version(version)
        set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${ARG_RECORDS})
        magi2norm_this_machine(machine_keys)
    endif ()
    foreach (record IN LISTS ARG_RECORDS)
        magi2norm_check_tuning_record(${record} ${version} "${ARG_ANY_MACHINE}" "${ARG_GPU_BACKENDS}" "${machine_keys}")
        file(READ ${record} json)
        _magi2norm_record_get(backend backend)
        if (backend IN_LIST backends_seen)
            message(FATAL_ERROR "tuning record ${record}: a second ${backend} record (MAGI2NORM_TUNING takes one a backend)")
        endif ()
        list(APPEND backends_seen ${backend})
        set(scope gpu)
        set(base_params ${ARG_GPU_PARAMS})
        set(capability "")
        if (backend STREQUAL "cpu")
            set(scope cpu)
            set(base_params ${ARG_CPU_PARAMS})
            _magi2norm_tuning_runtime_knobs()
        elseif (backend STREQUAL "cuda")
            # The CUDA families' two targets: 8.6 for sm_86 and newer, 8.0 below.
            _magi2norm_record_int(capability machine gpu compute_capability)
            if (capability LESS 86)
                set(capability 80)
            else ()
                set(capability 86)
            endif ()
        endif ()
        string(JSON gpu_name ERROR_VARIABLE no_gpu GET "${json}" machine gpu name)
        if (NOT scope STREQUAL "cpu")
            if (no_gpu)
                set(gpu_name "the GPU it was measured on")
            endif ()
            message(STATUS "Tuning record ${record}: ${backend} classes for ${gpu_name}")
        endif ()

        _magi2norm_record_get(classes_json classes)
        string(JSON count LENGTH "${classes_json}")
        if (count GREATER 0)
            math(EXPR last "${count} - 1")
            foreach (i RANGE ${last})
                _magi2norm_record_get(significant classes ${i} significant)
                if (NOT significant)
                    continue()
                endif ()
                math(EXPR n "${n} + 1")
                list(APPEND classes ${n})
                _magi2norm_tuning_class(${i})
                set(MAGI2NORM_TUNING_CLASS_${n}_BACKEND ${backend} PARENT_SCOPE)
                set(MAGI2NORM_TUNING_CLASS_${n}_PASS ${pass} PARENT_SCOPE)
                set(MAGI2NORM_TUNING_CLASS_${n}_CAPABILITY ${capability} PARENT_SCOPE)
                set(MAGI2NORM_TUNING_CLASS_${n}_DTYPES ${dtypes} PARENT_SCOPE)
                set(MAGI2NORM_TUNING_CLASS_${n}_BOUNDS ${bounds} PARENT_SCOPE)
                set(MAGI2NORM_TUNING_CLASS_${n}_PARAMS ${params} ${class_params} PARENT_SCOPE)
                message(STATUS "Tuning class t${n} (${backend} ${pass} ${name}): ${dtypes}, D ${dim_min}..${dim_max}, "
                               "${bytes_min}..${bytes_max} bytes a call: ${class_params}")
            endforeach ()
        endif ()
    endforeach ()
    set(MAGI2NORM_TUNING_CLASSES ${classes} PARENT_SCOPE)
endfunction()

# The CPU record's runtime knobs into the caller's caller (magi2norm_tuning's PARENT_SCOPE).
# Reads json and record.
macro(_magi2norm_tuning_runtime_knobs)
    _magi2norm_record_get(runtime_json runtime)
    string(JSON _count LENGTH "${runtime_json}")
    if (_count GREATER 0)
        math(EXPR _last "${_count} - 1")
        foreach (_i RANGE ${_last})
            string(JSON _knob MEMBER "${runtime_json}" ${_i})
            if (NOT _knob IN_LIST MAGI2NORM_KNOBS_runtime)
                message(FATAL_ERROR "tuning record ${record}: runtime.${_knob} is no runtime knob of schedules/runtime_knobs.def (${MAGI2NORM_KNOBS_runtime})")
            endif ()
            _magi2norm_record_int(_value runtime ${_knob})
            set(MAGI2NORM_RUNTIME_KNOB_${_knob} ${_value} PARENT_SCOPE)
        endforeach ()
    endif ()
endmacro()

# Class <i> of the record: sets name, pass (forward, or backward: a CPU record's class of backward
# calls, "pass" in the record), dtypes (in out, the backward's in out dx: x, dy, dx), bounds
# (and dim_min ... bytes_max), params (the pass's base params less the knobs the class sets) and
# class_params (the class's <scope>_ knobs: cpu_backward_ for a backward class). Reads json,
# record, scope, base_params and ARG_CPU_BACKWARD_PARAMS.
macro(_magi2norm_tuning_class i)
    _magi2norm_record_get(name classes ${i} name)
    string(JSON pass ERROR_VARIABLE _no_pass GET "${json}" classes ${i} pass)
    if (_no_pass)
        set(pass forward)
    endif ()
    set(sides in out)
    set(class_scope ${scope})
    set(class_base_params ${base_params})
    if (pass STREQUAL "backward" AND scope STREQUAL "cpu")
        set(sides in out dx)
        set(class_scope cpu_backward)
        set(class_base_params ${ARG_CPU_BACKWARD_PARAMS})
    elseif (NOT pass STREQUAL "forward")
        message(FATAL_ERROR "tuning record ${record}: class ${name}: pass is ${pass}, not forward (or backward, in a CPU record)")
    endif ()
    set(dtypes "")
    foreach (side IN ITEMS ${sides})
        _magi2norm_record_get(dtype classes ${i} ${side})
        if (NOT dtype IN_LIST MAGI2NORM_DTYPES)
            message(FATAL_ERROR "tuning record ${record}: class ${name}: ${side} is ${dtype}, not one of ${MAGI2NORM_DTYPES}")
        endif ()
        list(APPEND dtypes ${dtype})
    endforeach ()
    set(bounds "")
    foreach (bound IN ITEMS dim_min dim_max bytes_min bytes_max)
        _magi2norm_record_int(${bound} classes ${i} ${bound})
        list(APPEND bounds ${${bound}})
    endforeach ()
    foreach (axis IN ITEMS dim bytes)
        math(EXPR width "${${axis}_max} - ${${axis}_min}")
        if (width LESS 0)
            message(FATAL_ERROR "tuning record ${record}: class ${name}: ${axis}_min is past ${axis}_max")
        endif ()
    endforeach ()
    # The class's params in place of the base params' entries of the same knobs (a generator
    # parameter given twice is an error).
    _magi2norm_record_get(params_json classes ${i} params)
    string(JSON count_params LENGTH "${params_json}")
    set(params ${class_base_params})
    set(class_params "")
    if (count_params GREATER 0)
        math(EXPR last_param "${count_params} - 1")
        foreach (j RANGE ${last_param})
            string(JSON knob MEMBER "${params_json}" ${j})
            if (NOT knob MATCHES "^${class_scope}_(.*)$" OR NOT CMAKE_MATCH_1 IN_LIST MAGI2NORM_KNOBS_${class_scope})
                message(FATAL_ERROR "tuning record ${record}: class ${name}: ${knob} is no ${class_scope} knob of schedules/knobs.def")
            endif ()
            _magi2norm_record_int(value classes ${i} params ${knob})
            list(FILTER params EXCLUDE REGEX "^${knob}=")
            list(APPEND class_params ${knob}=${value})
        endforeach ()
    endif ()
endmacro()

# _magi2norm_record_get(<out> <path...>): the record's member at <path> (JSON text for objects
# and arrays, ON/OFF for booleans), else FATAL_ERROR naming it. Reads json and record.
macro(_magi2norm_record_get out)
    string(JSON ${out} ERROR_VARIABLE _error GET "${json}" ${ARGN})
    if (_error)
        list(JOIN ARGN "." _member)
        message(FATAL_ERROR "tuning record ${record}: ${_member} is missing (${_error})")
    endif ()
endmacro()

# _magi2norm_record_int(<out> <path...>): the member at <path>, which must be an integer in
# [0, 2^63 - 1] (the runtime's bounds and thresholds are int64).
macro(_magi2norm_record_int out)
    _magi2norm_record_get(${out} ${ARGN})
    string(LENGTH "${${out}}" _digits)
    if (NOT ${out} MATCHES "^[0-9]+$" OR _digits GREATER 19 OR (_digits EQUAL 19 AND ${out} STRGREATER "9223372036854775807"))
        list(JOIN ARGN "." _member)
        message(FATAL_ERROR "tuning record ${record}: ${_member} is ${${out}}, not an integer in [0, 2^63 - 1]")
    endif ()
endmacro()
