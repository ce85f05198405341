/// \file
/// Everything in one include: `#include "lockstep.h"`.
#pragma once

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "ops/batch_norm.h"
#include "ops/conv.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/join.h"
#include "ops/loss.h"
#include "ops/matmul.h"
#include "ops/max.h"
#include "ops/pool.h"
#include "ops/reduce.h"
#include "ops/softmax.h"
