// Host memory for the torch ops' CPU outputs, kept for reuse once torch frees them. A fresh
// allocation of an activation's size comes from mmap, and its first write faults every page in:
// on a 2-vCPU VM about 1 us a 4 KiB page, 4.4 ms instead of 1.3 for the pre-norm at T = 4096
// (docs/python.md). A block handed back is kept, mapped and warm, for the next output of its
// size, up to a byte budget (older blocks of other sizes make room).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <Python.h>

namespace magi2norm_python {

// The bytes a pool keeps at most: MAGI2NORM_POOL_BYTES from the environment, else 4 GiB.
std::size_t pool_budget();

// A DLPack capsule ("dltensor") of a new C-contiguous tensor of `shape` and DLPack dtype
// (`code`, `bits`) in a pooled block; torch.from_dlpack takes it, and torch's freeing of the
// tensor hands the block back, from any thread, without Python.
PyObject *pooled_tensor(const std::vector<std::int64_t> &shape, std::uint8_t code, std::uint8_t bits);

// Frees every kept block; returns the bytes freed.
std::size_t release_pool();
// Bytes kept now.
std::size_t pooled_bytes();

}  // namespace magi2norm_python
