/// \file
/// Starting a distributed program, in one include: who launched this process and which rank it
/// is (distributed/detect_launch.h), which backend its process group uses
/// (distributed/choose_backend.h), the default process group (distributed/init_process_group.h,
/// torch.distributed.init_process_group), and printing that says which rank is speaking
/// (distributed/log_rank.h).
///
/// A program is written once and started N times: `mpirun -n 2 ./chapter4` runs two copies of
/// the same program, which differ only in the rank the launcher gave each of them.
#pragma once

#include "distributed/choose_backend.h"
#include "distributed/detect_launch.h"
#include "distributed/init_process_group.h"
#include "distributed/log_rank.h"
