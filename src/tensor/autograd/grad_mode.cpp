#include "tensor/autograd/grad_mode.h"

namespace lockstep {

namespace {
// Per thread, as in PyTorch: a no_grad block on one thread does not affect another.
thread_local bool grad_enabled = true;
}  // namespace

bool grad_mode_enabled() { return grad_enabled; }
void set_grad_mode(bool enabled) { grad_enabled = enabled; }

}  // namespace lockstep
