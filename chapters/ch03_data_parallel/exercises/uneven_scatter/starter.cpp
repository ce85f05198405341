// Exercise ch03_uneven_scatter: your file. Write DataParallel's scatter for a batch that the
// devices do not divide evenly. Build and test it with:  make exercise EX=ch03_uneven_scatter
#include <vector>

#include "lockstep.h"

namespace exercise {

using namespace lockstep;

std::vector<Tensor> scatter_batch(const Tensor& batch, const std::vector<Device>& devices) {
  // TODO: cut batch (B, ...) along dim 0 as torch.chunk(batch, len(devices)) does:
  //   - every chunk has ceil(B / n) rows, except the last, which has what is left;
  //   - so there may be fewer chunks than devices (B = 2 on 3 devices: two chunks of one row);
  //   - chunk i is a view of the batch's rows (batch.slice(0, start, end)), moved to devices[i]
  //     with .to(devices[i]), so that gradients flow back to the batch.
  (void)batch, (void)devices;
  throw Error("scatter_batch: not written yet (write the TODO in starter.cpp)");
}

}  // namespace exercise
