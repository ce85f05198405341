/// \file
/// parallel_apply (torch.nn.parallel.parallel_apply): every replica's forward pass at the same
/// time, one CPU thread per replica.
#pragma once

#include <memory>
#include <vector>

#include "core/device.h"
#include "tensor/tensor.h"
#include "nn/module.h"

namespace lockstep {

/// Runs replicas[i](inputs[i]) for every i at once and returns the outputs in order (all three
/// vectors of the same length). There is one thread per replica: the caller's OpenMP team, in
/// which the caller itself runs replica 0. Each thread records the graph as the caller would
/// (its grad mode) and draws random numbers from a generator of its own, seeded from the default
/// generator (one draw per replica and call); replicas on the CPU share the caller's CPU
/// threads out among them; replicas sharing a GPU queue their work on streams of their own,
/// ordered after the caller's work before them and before the caller's work after them. If
/// replicas throw, all are still waited for, then the first (by index) error is thrown again in
/// the caller, naming the replica and its device.
std::vector<Tensor> parallel_apply(const std::vector<std::shared_ptr<Module>>& replicas,
                                   const std::vector<Tensor>& inputs, const std::vector<Device>& devices);

/// How many of the caller's CPU threads (get_num_threads()) each CPU replica among `devices`
/// runs its kernels on: an equal share, at least one, so that more replicas than threads
/// oversubscribe the cores rather than wait for each other.
int cpu_threads_per_replica(const std::vector<Device>& devices);

}  // namespace lockstep
