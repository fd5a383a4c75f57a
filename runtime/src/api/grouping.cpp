#include "magi2norm/magi2norm.hpp"

namespace magi2norm {

Grouping Grouping::none() { return Grouping(); }

Grouping Grouping::sizes(std::vector<std::int64_t> group_sizes) {
    Grouping g;
    g.kind_ = Kind::sizes;
    g.sizes_ = std::move(group_sizes);
    return g;
}

Grouping Grouping::ids(const std::int32_t *token_ids, std::int64_t num_tokens, Memory memory) {
    Grouping g;
    g.kind_ = Kind::ids;
    g.ids_ = token_ids;
    g.num_ids_ = num_tokens;
    g.ids_memory_ = memory;
    return g;
}

Grouping Grouping::from(const ModalityDispatcher &dispatcher) { return sizes(dispatcher.group_sizes()); }

}  // namespace magi2norm
