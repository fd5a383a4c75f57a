#include "HalideRuntime.h"
#include "magi2norm/magi2norm.hpp"

namespace magi2norm {

// The one Halide runtime inside the library owns the thread pool all variants share.
void set_num_threads(int n) { halide_set_num_threads(n <= 0 ? 0 : n); }

int num_threads() { return halide_get_num_threads(); }

}  // namespace magi2norm
