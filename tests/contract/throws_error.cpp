#include "throws_error.hpp"

#include <algorithm>
#include <cctype>

namespace contract {
namespace {

std::string lower(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
    return text;
}

}  // namespace

testing::AssertionResult throws_error(const std::function<void()> &call, magi2norm::ErrorCode code,
                                      const std::vector<std::string> &words) {
    try {
        call();
    } catch (const magi2norm::Error &error) {
        if (error.code() != code) {
            return testing::AssertionFailure() << "threw Error(" << magi2norm::error_code_name(error.code())
                                               << "), expected Error(" << magi2norm::error_code_name(code)
                                               << "): " << error.what();
        }
        const std::string message = lower(error.what());
        for (const std::string &word : words) {
            if (message.find(lower(word)) != std::string::npos) return testing::AssertionSuccess();
        }
        testing::AssertionResult failure = testing::AssertionFailure();
        failure << "the message \"" << error.what() << "\" names none of:";
        for (const std::string &word : words) failure << " \"" << word << "\"";
        return failure;
    } catch (const std::exception &other) {
        return testing::AssertionFailure() << "threw a non-magi2norm exception: " << other.what();
    }
    return testing::AssertionFailure() << "did not throw; expected Error(" << magi2norm::error_code_name(code) << ")";
}

}  // namespace contract
