// The runtime's side of CPU threading (the public side is in magi2norm.hpp).
#pragma once

namespace magi2norm::detail {

// While one of these lives on a thread, the parallel loops of the Halide pipelines that thread
// runs execute their tasks in order on it. For work that is already one task of many (a slice
// of the streaming path), handing its few inner tasks to the pool again costs more than they do.
class InlineParallelLoops {
public:
    InlineParallelLoops();
    ~InlineParallelLoops();
    InlineParallelLoops(const InlineParallelLoops &) = delete;
    InlineParallelLoops &operator=(const InlineParallelLoops &) = delete;

private:
    bool previous_;
};

}  // namespace magi2norm::detail
