// What the library's own tests, tuner and benchmarks use beyond the public API, in one place:
// the call's plan and the running of a chosen variant on it (the tuner's candidates), the one
// variant table and its lookup, the overlap test, the backward's block rule and fixed-order sum,
// the installation of Halide's hooks, and the CPU pool. Not installed, and no promise of
// stability: the target magi2norm_internal (runtime/CMakeLists.txt) puts it on a program's
// include path.
#pragma once

#include "../../src/call/backward.hpp"
#include "../../src/call/call_checks.hpp"
#include "../../src/call/call_plan.hpp"
#include "../../src/call/variant_choice.hpp"
#include "../../src/devices/halide_calls.hpp"
#include "../../src/devices/worker_pool.hpp"
#include "../../src/variants/kernels.hpp"
#include "../../src/views/overlap.hpp"
