// The test's own OpenCL objects, as an OpenCL host application makes them: a context and an
// in-order queue on the first device (PoCL here), buffers uploaded and read back.
#pragma once

#include <CL/cl.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "magi2norm/magi2norm.hpp"

namespace opencl_test {

using magi2norm::DType;
using magi2norm::ErrorCode;
using magi2norm::Memory;

constexpr unsigned char kPoison = 0xAB;

// A context and an in-order queue on the first device of the first platform (PoCL here).
class Device {
public:
    Device() {
        cl_platform_id platform = nullptr;
        cl_device_id device = nullptr;
        if (clGetPlatformIDs(1, &platform, nullptr) != CL_SUCCESS ||
            clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, nullptr) != CL_SUCCESS) {
            return;
        }
        cl_int status = CL_SUCCESS;
        context_ = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &status);
        if (status == CL_SUCCESS) queue_ = clCreateCommandQueue(context_, device, 0, &status);
        device_ = device;
    }
    ~Device() {
        if (queue_) clReleaseCommandQueue(queue_);
        if (context_) clReleaseContext(context_);
    }
    Device(const Device &) = delete;
    Device &operator=(const Device &) = delete;

    bool ok() const { return queue_ != nullptr; }
    cl_context context() const { return context_; }
    cl_command_queue queue() const { return queue_; }
    cl_device_id device() const { return device_; }

    // A buffer holding a copy of `bytes` (a std::vector<unsigned char> or ref::Bytes).
    template <typename Bytes>
    cl_mem upload(const Bytes &bytes) const {
        cl_int status = CL_SUCCESS;
        cl_mem mem = clCreateBuffer(context_, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes.size(),
                                    const_cast<unsigned char *>(bytes.data()), &status);
        EXPECT_EQ(status, CL_SUCCESS);
        return mem;
    }
    std::vector<unsigned char> download(cl_mem mem, std::size_t size) const {
        std::vector<unsigned char> bytes(size);
        EXPECT_EQ(clEnqueueReadBuffer(queue_, mem, CL_TRUE, 0, size, bytes.data(), 0, nullptr, nullptr), CL_SUCCESS);
        return bytes;
    }

private:
    cl_device_id device_ = nullptr;
    cl_context context_ = nullptr;
    cl_command_queue queue_ = nullptr;
};

// cl_mem handles released at the end of a test.
struct Buffers {
    std::vector<cl_mem> mems;
    cl_mem add(cl_mem mem) {
        mems.push_back(mem);
        return mem;
    }
    ~Buffers() {
        for (cl_mem m : mems) clReleaseMemObject(m);
    }
};

template <typename T>
std::vector<unsigned char> bytes_of(const std::vector<T> &v) {
    std::vector<unsigned char> bytes(v.size() * sizeof(T));
    std::memcpy(bytes.data(), v.data(), bytes.size());
    return bytes;
}

}  // namespace opencl_test
