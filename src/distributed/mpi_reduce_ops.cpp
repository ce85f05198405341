// The MPI reduction ops of Lockstep's dtypes (declared in distributed/mpi_reduce_ops.h).
//
// MPI calls a user-defined op with two arrays, `in` and `inout`, and expects inout[i] = in[i]
// op inout[i]; within one all-reduce it may call it many times, on any pair of partial results,
// as its algorithm (a ring, a tree, recursive doubling) pairs up the ranks. Each call here
// rounds once per element. With two ranks the 16-bit sum is therefore the float sum rounded
// once; with more, every partial sum is rounded on the way, as in NCCL's ring.
#include "distributed/mpi_reduce_ops.h"

#include <cmath>

#include "core/half.h"
#include "distributed/mpi_check.h"

namespace lockstep::mpi {

namespace {

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2, "16-bit floats must travel as MPI_UINT16_T");

// Rounding the float sum of two 16-bit numbers to 16 bits gives exactly the 16-bit sum rounded
// to nearest even: float's 24-bit significand is at least 2p + 2 bits for f16's p = 11 and
// bf16's p = 8, which makes rounding twice (to float, then to 16 bits) as good as once. Inf and
// NaN follow float's rules: inf + finite = inf, inf + -inf = NaN, NaN + anything = NaN. A sum
// beyond the format's range (65504 for f16) becomes inf.
struct Add {
  float operator()(float a, float b) const { return a + b; }
};

// NaN wins, as in torch.maximum: a rank's NaN must not vanish in a maximum.
struct Maximum {
  float operator()(float a, float b) const { return std::isnan(a) || a > b ? a : b; }
};

// The function MPI calls: inout[i] = combine(in[i], inout[i]), elements of type T (Half or
// BFloat16) widened to float and rounded back.
template <class T, class Combine>
void combine_16bit(void* in, void* inout, int* count, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *count; ++i) b[i] = T(Combine()(static_cast<float>(a[i]), static_cast<float>(b[i])));
}

// The ops of one 16-bit format; MPI_OP_NULL until create_16bit_ops() and after free_16bit_ops().
struct Ops {
  MPI_Op sum = MPI_OP_NULL;
  MPI_Op max = MPI_OP_NULL;
};
Ops f16_ops;
Ops bf16_ops;

template <class T>
void create(Ops& ops) {
  // Commutative (a + b and b + a round alike), so MPI may pair the ranks in any order.
  const int commutes = 1;
  LOCKSTEP_MPI_CHECK(MPI_Op_create(&combine_16bit<T, Add>, commutes, &ops.sum));
  LOCKSTEP_MPI_CHECK(MPI_Op_create(&combine_16bit<T, Maximum>, commutes, &ops.max));
}

}  // namespace

MPI_Op reduce_op(DType dtype, ReduceOp op) {
  const bool max = op == ReduceOp::Max;
  switch (dtype) {
    case DType::f16: return max ? f16_ops.max : f16_ops.sum;
    case DType::bf16: return max ? bf16_ops.max : bf16_ops.sum;
    default: return max ? MPI_MAX : MPI_SUM;
  }
}

void create_16bit_ops() {
  if (f16_ops.sum != MPI_OP_NULL) return;
  create<Half>(f16_ops);
  create<BFloat16>(bf16_ops);
}

void free_16bit_ops() {
  for (MPI_Op* op : {&f16_ops.sum, &f16_ops.max, &bf16_ops.sum, &bf16_ops.max}) {
    // MPI_Op_free sets the handle back to MPI_OP_NULL.
    if (*op != MPI_OP_NULL) LOCKSTEP_MPI_CHECK(MPI_Op_free(op));
  }
}

}  // namespace lockstep::mpi
