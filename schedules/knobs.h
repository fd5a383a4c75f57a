// The knobs of knobs.def as the schedules read them.
#pragma once

namespace magi2norm::schedules {

struct CpuKnobs {
#define MAGI2NORM_CPU_KNOB(name, value, values, meaning) int name = value;
#define MAGI2NORM_GPU_KNOB(name, value, values, meaning)
#define MAGI2NORM_CPU_BACKWARD_KNOB(name, value, values, meaning)
#include "knobs.def"
};

struct GpuKnobs {
#define MAGI2NORM_CPU_KNOB(name, value, values, meaning)
#define MAGI2NORM_GPU_KNOB(name, value, values, meaning) int name = value;
#define MAGI2NORM_CPU_BACKWARD_KNOB(name, value, values, meaning)
#include "knobs.def"
};

struct CpuBackwardKnobs {
#define MAGI2NORM_CPU_KNOB(name, value, values, meaning)
#define MAGI2NORM_GPU_KNOB(name, value, values, meaning)
#define MAGI2NORM_CPU_BACKWARD_KNOB(name, value, values, meaning) int name = value;
#include "knobs.def"
};

}  // namespace magi2norm::schedules
