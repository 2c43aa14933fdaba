// The public output-file API (krafla.h, "Output files"): core/out_file.h behind an opaque handle.
#include <new>

#include "core/out_file.h"
#include "krafla.h"

struct ml_output {
  ml_out_file f;
};

extern "C" {

ml_status ml_output_open(ml_output** out, const char* path, const char* const* inputs, size_t n_inputs,
                         ml_error* err) {
  *out = nullptr;
  ml_output* o = new (std::nothrow) ml_output;
  if (!o) return ml_fail(err, ML_E_NOMEM, "%s: cannot allocate the output", path ? path : "(null)");
  const ml_status s = ml_out_open(&o->f, path, inputs, n_inputs, err);
  if (s != ML_OK) {
    delete o;
    return s;
  }
  *out = o;
  return ML_OK;
}

ml_status ml_output_write(ml_output* out, const void* data, size_t n, ml_error* err) {
  return ml_out_write(&out->f, data, n, err);
}

ml_status ml_output_commit(ml_output* out, ml_error* err) {
  const ml_status s = ml_out_commit(&out->f, err);
  ml_out_discard(&out->f);
  delete out;
  return s;
}

void ml_output_discard(ml_output* out) {
  if (!out) return;
  ml_out_discard(&out->f);
  delete out;
}

void ml_install_cleanup_handlers(void) { ml_cleanup_install(); }

}  // extern "C"
