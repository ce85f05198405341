// Exercise ch03_uneven_scatter: the test of the student's scatter_batch (starter.cpp or the file
// given with FILE=...): chunk sizes as torch.chunk makes them, each chunk holding the right rows
// on the right device, gradients flowing back to the batch, and the same chunks as the
// library's scatter (chapter 3's DataParallel).
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "lockstep.h"

namespace exercise {
/// The batch cut along dim 0 into chunks as torch.chunk does, chunk i on devices[i] (the
/// student's).
std::vector<lockstep::Tensor> scatter_batch(const lockstep::Tensor& batch, const std::vector<lockstep::Device>& devices);
}  // namespace exercise

namespace lockstep {
namespace {

// Rows numbered 0, 1, ..., B - 1 (each row of 2 columns holds its number twice).
Tensor numbered_rows(int64_t rows) { return arange(0, static_cast<double>(rows)).reshape({rows, 1}).expand({rows, 2}).contiguous(); }

std::vector<int64_t> chunk_sizes(const std::vector<Tensor>& chunks) {
  std::vector<int64_t> sizes;
  for (const Tensor& chunk : chunks) sizes.push_back(chunk.size(0));
  return sizes;
}

// (rows, devices) -> the sizes torch.chunk(torch.arange(rows), devices) gives.
const std::vector<std::pair<std::pair<int64_t, size_t>, std::vector<int64_t>>> kChunkSizes = {
    {{12, 3}, {4, 4, 4}},        // divides evenly
    {{10, 4}, {3, 3, 3, 1}},     // the last chunk is smaller
    {{10, 3}, {4, 4, 2}},        //
    {{13, 6}, {3, 3, 3, 3, 1}},  // only five chunks for six devices
    {{2, 3}, {1, 1}},            // fewer rows than devices
    {{1, 2}, {1}},               //
};

TEST(UnevenScatter, ChunkSizesAreTorchChunks) {
  for (const auto& [in, sizes] : kChunkSizes) {
    const std::vector<Device> devices(in.second, Device::cpu());
    EXPECT_EQ(chunk_sizes(exercise::scatter_batch(numbered_rows(in.first), devices)), sizes)
        << in.first << " rows on " << in.second << " devices";
  }
}

TEST(UnevenScatter, ChunksHoldTheBatchsRowsInOrder) {
  const Tensor batch = numbered_rows(10);
  const std::vector<Tensor> chunks = exercise::scatter_batch(batch, std::vector<Device>(4, Device::cpu()));
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(cat(chunks, 0).to_vector<double>(), batch.to_vector<double>());
  for (const Tensor& chunk : chunks) EXPECT_EQ(chunk.size(1), 2) << "a chunk keeps every column of its rows";
}

TEST(UnevenScatter, GradientsFlowBackToTheBatch) {
  const Tensor batch = numbered_rows(7).requires_grad_(true);
  const std::vector<Tensor> chunks = exercise::scatter_batch(batch, std::vector<Device>(3, Device::cpu()));
  ASSERT_EQ(chunks.size(), 3u);
  Tensor loss = sum(chunks[0]);
  for (size_t i = 1; i < chunks.size(); ++i) loss = loss + (static_cast<double>(i) + 1.0) * sum(chunks[i]);
  loss.backward();
  ASSERT_TRUE(batch.grad().defined()) << "no gradient reached the batch: build the chunks from its rows";
  // Rows 0-2 went to chunk 0 (weight 1), rows 3-5 to chunk 1 (weight 2), row 6 to chunk 2 (3).
  EXPECT_EQ(batch.grad().to_vector<double>(), std::vector<double>({1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 3}));
}

TEST(UnevenScatter, AgreesWithTheLibrarysScatter) {
  Generator g(3);
  const Tensor batch = randn({11, 3}, {}, &g);
  const std::vector<Device> devices(4, Device::cpu());
  const std::vector<Tensor> mine = exercise::scatter_batch(batch, devices), reference = scatter(batch, devices);
  ASSERT_EQ(mine.size(), reference.size());
  for (size_t i = 0; i < mine.size(); ++i) {
    EXPECT_EQ(mine[i].shape(), reference[i].shape()) << "chunk " << i;
    EXPECT_EQ(mine[i].device(), reference[i].device()) << "chunk " << i;
    EXPECT_EQ(mine[i].to_vector<float>(), reference[i].to_vector<float>()) << "chunk " << i;
  }
}

}  // namespace
}  // namespace lockstep
