// Names the case that touched a guard page: a SIGSEGV handler that writes the running case's
// name and dies with the signal, which fails the test.
#pragma once

#include <string>

namespace guard {

// The case running now, for the handler.
void set_running_case(const std::string &name);

// Installs the handler while it lives; restores the previous one after.
class FaultReport {
public:
    FaultReport();
    ~FaultReport();
    FaultReport(const FaultReport &) = delete;
    FaultReport &operator=(const FaultReport &) = delete;

private:
    void (*previous_)(int);
};

}  // namespace guard
