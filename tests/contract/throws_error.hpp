// Asserting that a call is refused the way SPEC.md's API promises: a magi2norm::Error with the
// expected code whose message names the problem.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "magi2norm/magi2norm.hpp"

namespace contract {

// Success when `call` throws magi2norm::Error with `code` and a message containing at least one
// of `words` (case-insensitive); the failure says what was thrown instead.
testing::AssertionResult throws_error(const std::function<void()> &call, magi2norm::ErrorCode code,
                                      const std::vector<std::string> &words);

}  // namespace contract
