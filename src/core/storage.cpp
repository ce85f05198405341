#include "core/storage.h"

namespace lockstep {

Storage::Storage(size_t nbytes, Allocator& allocator)
    : data_(allocator.allocate(nbytes)), nbytes_(nbytes), allocator_(allocator), category_(current_memory_category()) {
  detail::count_memory(device(), category_, static_cast<int64_t>(nbytes_));
}

Storage::~Storage() {
  detail::count_memory(device(), category_, -static_cast<int64_t>(nbytes_));
  allocator_.deallocate(data_, nbytes_);
}

void Storage::set_category(MemoryCategory category) {
  if (category == category_) return;
  detail::count_memory(device(), category_, -static_cast<int64_t>(nbytes_));
  category_ = category;
  detail::count_memory(device(), category_, static_cast<int64_t>(nbytes_));
}

void Storage::resize(size_t nbytes) {
  if (nbytes == nbytes_) return;
  // Allocate first: if that throws, the storage keeps the memory it had.
  void* fresh = allocator_.allocate(nbytes);
  allocator_.deallocate(data_, nbytes_);
  detail::count_memory(device(), category_, static_cast<int64_t>(nbytes) - static_cast<int64_t>(nbytes_));
  data_ = fresh;
  nbytes_ = nbytes;
}

}  // namespace lockstep
