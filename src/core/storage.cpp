#include "core/storage.h"

namespace lockstep {

Storage::Storage(size_t nbytes, Allocator& allocator)
    : data_(allocator.allocate(nbytes)), nbytes_(nbytes), allocator_(allocator) {}

Storage::~Storage() { allocator_.deallocate(data_, nbytes_); }

void Storage::resize(size_t nbytes) {
  if (nbytes == nbytes_) return;
  // Allocate first: if that throws, the storage keeps the memory it had.
  void* fresh = allocator_.allocate(nbytes);
  allocator_.deallocate(data_, nbytes_);
  data_ = fresh;
  nbytes_ = nbytes;
}

}  // namespace lockstep
