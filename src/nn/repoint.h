/// \file
/// The helper behind Module::on_module_replaced for modules that keep typed members for their
/// children (the ResNets' `conv1`, `bn1`, ...): re-point the member at the new child, or refuse
/// a child of the wrong type.
#pragma once

#include <memory>
#include <string>

#include "core/error.h"
#include "nn/module.h"

namespace lockstep {

/// Points `member` at `module`, the new child `name` of `owner`, which forward calls through
/// the member; a module that is not an `M` (named `needed` in the error) would not fit there.
template <class M>
void repoint(std::shared_ptr<M>& member, const std::shared_ptr<Module>& module, const Module& owner,
             const std::string& name, const char* needed) {
  auto typed = std::dynamic_pointer_cast<M>(module);
  LOCKSTEP_CHECK(typed != nullptr, "replace_module: ", owner.name(), "'s \"", name, "\" must be a ", needed,
                 " (or a subclass, such as SyncBatchNorm for BatchNorm2d), got ", module->name());
  member = std::move(typed);
}

}  // namespace lockstep
