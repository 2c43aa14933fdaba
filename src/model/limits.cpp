// Physical memory, for requests that could never fit (model/limits.h).
#include "model/limits.h"

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

uint64_t ml_phys_mem_bytes() {
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGE_SIZE) && !defined(__EMSCRIPTEN__)
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;
  return (uint64_t)pages * (uint64_t)page;
#else
  return 0;
#endif
}

ml_status ml_check_ram(uint64_t bytes, const char* what, const char* hint, ml_error* err) {
  const uint64_t ram = ml_phys_mem_bytes();
  if (ram == 0 || bytes <= ram) return ML_OK;
  return ml_fail(err, ML_E_NOMEM, "%s needs %llu bytes, more than this machine's %llu bytes of RAM%s", what,
                 (unsigned long long)bytes, (unsigned long long)ram, hint ? hint : "");
}
