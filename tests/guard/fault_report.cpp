#include "fault_report.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace guard {
namespace {

// The case running now (the handler may only write).
char running[512] = "";

void report_fault(int signal) {
    const char prefix[] = "\nguard page touched (a read or write past a view) in case: ";
    (void)!write(2, prefix, sizeof prefix - 1);
    (void)!write(2, running, std::strlen(running));
    (void)!write(2, "\n", 1);
    ::signal(signal, SIG_DFL);
    raise(signal);
}

}  // namespace

void set_running_case(const std::string &name) { std::snprintf(running, sizeof running, "%s", name.c_str()); }

FaultReport::FaultReport() : previous_(::signal(SIGSEGV, report_fault)) {}
FaultReport::~FaultReport() { ::signal(SIGSEGV, previous_); }

}  // namespace guard
