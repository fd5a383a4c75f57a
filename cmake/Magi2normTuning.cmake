# What a tuning record (MAGI2NORM_TUNING, docs/tuning_record.md) sets in a build: the runtime's
# knobs, and the CPU schedule parameters of each significant class of calls, which
# runtime/CMakeLists.txt turns into class variant families. Without a record: knobs.def's defaults
# and no classes. Needs Magi2normVariants.cmake (the knobs and this build's identity).
include(${CMAKE_CURRENT_LIST_DIR}/check_tuning_record.cmake)

# magi2norm_tuning(RECORD <file or empty> ANY_MACHINE <bool> CPU_PARAMS <generator params...>)
# Checks the record against this build (magi2norm_check_tuning_record) and sets, in the caller's
# scope:
#   MAGI2NORM_RUNTIME_KNOB_<name>     every runtime knob of knobs.def: the record's value, else the default
#   MAGI2NORM_TUNING_CLASSES          1 .. n, the record's significant classes in their order
#   MAGI2NORM_TUNING_CLASS_<n>_DTYPES <in> <out>
#   MAGI2NORM_TUNING_CLASS_<n>_BOUNDS <dim_min> <dim_max> <bytes_min> <bytes_max>
#   MAGI2NORM_TUNING_CLASS_<n>_PARAMS CPU_PARAMS with the class's params in place of theirs
# A record member the build reads but cannot use (an unknown knob, a bound that is no int64, a
# dtype outside MAGI2NORM_DTYPES) stops the configure; members it does not read are ignored.
function(magi2norm_tuning)
    cmake_parse_arguments(PARSE_ARGV 0 ARG "" "RECORD;ANY_MACHINE" "CPU_PARAMS")
    foreach (knob IN LISTS MAGI2NORM_KNOBS_runtime)
        set(MAGI2NORM_RUNTIME_KNOB_${knob} ${MAGI2NORM_KNOB_DEFAULT_runtime_${knob}} PARENT_SCOPE)
    endforeach ()
    set(MAGI2NORM_TUNING_CLASSES "" PARENT_SCOPE)
    if (NOT ARG_RECORD)
        return()
    endif ()
    set(record ${ARG_RECORD})
    # A change to the record or to the sources it was measured on configures again (and checks again).
    magi2norm_generator_version(version sources)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${record} ${sources})
    magi2norm_machine_cpu(cpu)
    magi2norm_machine_isa(isa)
    magi2norm_check_tuning_record(${record} ${version} "${cpu}" ${isa} "${ARG_ANY_MACHINE}")
    file(READ ${record} json)

    _magi2norm_record_get(runtime_json runtime)
    string(JSON count LENGTH "${runtime_json}")
    if (count GREATER 0)
        math(EXPR last "${count} - 1")
        foreach (i RANGE ${last})
            string(JSON knob MEMBER "${runtime_json}" ${i})
            if (NOT knob IN_LIST MAGI2NORM_KNOBS_runtime)
                message(FATAL_ERROR "tuning record ${record}: runtime.${knob} is no runtime knob of schedules/knobs.def (${MAGI2NORM_KNOBS_runtime})")
            endif ()
            _magi2norm_record_int(value runtime ${knob})
            set(MAGI2NORM_RUNTIME_KNOB_${knob} ${value} PARENT_SCOPE)
        endforeach ()
    endif ()

    _magi2norm_record_get(classes_json classes)
    string(JSON count LENGTH "${classes_json}")
    set(classes "")
    set(n 0)
    if (count GREATER 0)
        math(EXPR last "${count} - 1")
        foreach (i RANGE ${last})
            _magi2norm_record_get(significant classes ${i} significant)
            if (NOT significant)
                continue()
            endif ()
            math(EXPR n "${n} + 1")
            list(APPEND classes ${n})
            _magi2norm_record_get(name classes ${i} name)
            set(dtypes "")
            foreach (side IN ITEMS in out)
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
            # The class's params in place of CPU_PARAMS' entries of the same knobs (a generator
            # parameter given twice is an error).
            _magi2norm_record_get(params_json classes ${i} params)
            string(JSON count_params LENGTH "${params_json}")
            set(params ${ARG_CPU_PARAMS})
            set(class_params "")
            if (count_params GREATER 0)
                math(EXPR last_param "${count_params} - 1")
                foreach (j RANGE ${last_param})
                    string(JSON knob MEMBER "${params_json}" ${j})
                    if (NOT knob MATCHES "^cpu_(.*)$" OR NOT CMAKE_MATCH_1 IN_LIST MAGI2NORM_KNOBS_cpu)
                        message(FATAL_ERROR "tuning record ${record}: class ${name}: ${knob} is no CPU knob of schedules/knobs.def")
                    endif ()
                    _magi2norm_record_int(value classes ${i} params ${knob})
                    list(FILTER params EXCLUDE REGEX "^${knob}=")
                    list(APPEND class_params ${knob}=${value})
                endforeach ()
            endif ()
            set(MAGI2NORM_TUNING_CLASS_${n}_DTYPES ${dtypes} PARENT_SCOPE)
            set(MAGI2NORM_TUNING_CLASS_${n}_BOUNDS ${bounds} PARENT_SCOPE)
            set(MAGI2NORM_TUNING_CLASS_${n}_PARAMS ${params} ${class_params} PARENT_SCOPE)
            message(STATUS "Tuning class t${n} (${name}): ${dtypes}, D ${dim_min}..${dim_max}, "
                           "${bytes_min}..${bytes_max} bytes a call: ${class_params}")
        endforeach ()
    endif ()
    set(MAGI2NORM_TUNING_CLASSES ${classes} PARENT_SCOPE)
endfunction()

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
