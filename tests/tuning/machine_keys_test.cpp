// The tuner's machine keys (tuning/machine_keys.cpp) on the made-up machine the configure's
// test reads too (tests/tuning_build/machine), and how a resumed record names a difference.
#include <gtest/gtest.h>

#include "machine.hpp"

namespace {

using namespace magi2norm::tuning;

TEST(MachineKeys, ReadAsTheConfigureReadsThem) {
    Machine m;
    read_cpu_keys(m, MAGI2NORM_MACHINE_FIXTURE "/cpuinfo", MAGI2NORM_MACHINE_FIXTURE "/cache");
    EXPECT_EQ(m.cpu, "Made-up Xeon @ 2.00GHz");
    EXPECT_EQ(m.vendor, "GenuineIntel");
    EXPECT_EQ(m.family, 6);
    EXPECT_EQ(m.model, 143);
    EXPECT_EQ(m.stepping, 8);
    EXPECT_EQ(m.cores, 4);    // two sockets of two cores
    EXPECT_EQ(m.threads, 8);  // two threads a core
    EXPECT_EQ(m.l1d, 48 << 10);
    EXPECT_EQ(m.l2, 2048 << 10);
    EXPECT_EQ(m.l3, std::int64_t{105} << 20);
}

TEST(MachineKeys, MissingFilesGiveTheUnknowns) {
    Machine m;
    read_cpu_keys(m, "/no/such/cpuinfo", "/no/such/cache");
    EXPECT_EQ(m.vendor, "unknown");
    EXPECT_EQ(m.family, -1);
    EXPECT_EQ(m.threads, 1);
    EXPECT_EQ(m.cores, 1);
    EXPECT_EQ(m.l3, 0);
}

TEST(MachineKeys, TheFirstDifferenceIsNamed) {
    Machine a;
    read_cpu_keys(a, MAGI2NORM_MACHINE_FIXTURE "/cpuinfo", MAGI2NORM_MACHINE_FIXTURE "/cache");
    a.isa = "x86-64-linux-sse41";
    Machine b = a;
    EXPECT_EQ(machine_difference(a, b), "");
    b.l3 = 32 << 20;
    EXPECT_EQ(machine_difference(a, b), "machine.caches.l3: the record's 110100480, this machine's 33554432");
    b.cores = 2;
    EXPECT_EQ(machine_difference(a, b), "machine.cores: the record's 4, this machine's 2");
    b = a;
    b.l1d = 1;  // not a key
    EXPECT_EQ(machine_difference(a, b), "");
}

}  // namespace
