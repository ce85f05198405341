#include "core/storage.h"

namespace lockstep {

Storage::Storage(size_t nbytes, Allocator& allocator)
    : data_(allocator.allocate(nbytes)), nbytes_(nbytes), allocator_(allocator) {}

Storage::~Storage() { allocator_.deallocate(data_, nbytes_); }

}  // namespace lockstep
