// CUDA graphs (see graph.h): capture through stream capture, with the caching allocator told
// to serve the capture from a pool of its own, and replay through one cudaGraphLaunch.
#include <cuda_runtime.h>

#include <atomic>
#include <exception>

#include "core/cuda/check.cuh"
#include "core/cuda/context.h"
#include "core/cuda/device_guard.cuh"
#include "core/cuda/graph.h"
#include "core/cuda/graph_pool.cuh"
#include "core/flop_count.h"

namespace lockstep::cuda {

namespace {

std::atomic<GraphPoolId> next_pool{1};

// What every failed capture's message ends with.
constexpr const char* kWhatAGraphRecords = " (a graph records GPU work only: no copy to the host, item() or synchronisation)";

// Ends a capture that went wrong: the stream leaves capture mode (so it works again), and what
// was recorded is dropped. Errors here are the capture's own, already being reported.
void abandon_capture(cudaStream_t stream) {
  cudaGraph_t partial = nullptr;
  if (cudaStreamEndCapture(stream, &partial) == cudaSuccess && partial != nullptr) cudaGraphDestroy(partial);
  cudaGetLastError();
}

}  // namespace

void CUDAGraph::capture(Device device, const std::function<void()>& work) {
  LOCKSTEP_CHECK(device.is_cuda(), "CUDAGraph::capture: a graph records GPU work; expected a CUDA device, got ", device);
  LOCKSTEP_CHECK(pool_ == 0, "CUDAGraph::capture: this graph already holds a capture; reset() it before capturing again");
  DeviceGuard guard(device);
  const auto stream = static_cast<cudaStream_t>(current_stream(device));
  // Work queued before is not part of the graph; its errors surface here, not in the capture.
  LOCKSTEP_CUDA_CHECK(cudaStreamSynchronize(stream));
  const GraphPoolId pool = next_pool.fetch_add(1);
  const int64_t flops_before = flops_counted();
  begin_graph_capture(device, stream, pool);
  // Thread-local mode: other threads (a DataLoader's workers pinning memory) may go on calling
  // CUDA; this thread may not make a call that would break the recording.
  cudaError_t status = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  cudaGraph_t graph = nullptr;
  if (status == cudaSuccess) {
    try {
      work();
    } catch (const std::exception& error) {
      abandon_capture(stream);
      end_graph_capture(device);
      release_graph_pool(device, pool);
      count_flops(flops_before - flops_counted());
      LOCKSTEP_FAIL("capturing a CUDA graph on ", device, " failed: ", error.what(), kWhatAGraphRecords);
    }
    status = cudaStreamEndCapture(stream, &graph);
  }
  end_graph_capture(device);
  // The work counted flops, but nothing ran: each replay counts them.
  const int64_t flops = flops_counted() - flops_before;
  count_flops(-flops);
  cudaGraphExec_t exec = nullptr;
  if (status == cudaSuccess) status = cudaGraphInstantiate(&exec, graph, 0);
  if (graph != nullptr) cudaGraphDestroy(graph);
  if (status != cudaSuccess) {
    cudaGetLastError();
    release_graph_pool(device, pool);
    LOCKSTEP_FAIL("capturing a CUDA graph on ", device, " failed: ", cudaGetErrorString(status), kWhatAGraphRecords);
  }
  device_ = device;
  stream_ = stream;
  exec_ = exec;
  pool_ = pool;
  flops_ = flops;
}

void CUDAGraph::replay() {
  LOCKSTEP_CHECK(exec_ != nullptr, "CUDAGraph::replay: nothing was captured; call capture() first");
  DeviceGuard guard(device_);
  LOCKSTEP_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), static_cast<cudaStream_t>(stream_)));
  count_flops(flops_);
}

void CUDAGraph::reset() {
  if (pool_ == 0) return;
  DeviceGuard guard(device_);
  // Replays still queued use the pool's blocks and the executable graph.
  LOCKSTEP_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)));
  const auto exec = static_cast<cudaGraphExec_t>(exec_);
  const GraphPoolId pool = pool_;
  exec_ = nullptr;
  pool_ = 0;
  flops_ = 0;
  release_graph_pool(device_, pool);
  LOCKSTEP_CUDA_CHECK(cudaGraphExecDestroy(exec));
}

void CUDAGraph::destroy() noexcept {
  detail::release_quietly("destroying a CUDA graph", [&] { reset(); });
}

}  // namespace lockstep::cuda
