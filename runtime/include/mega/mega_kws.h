/* Mega-chunk keyword spotting runtime: the C API.
 *
 * Every function returns a status code (MEGA_OK = 0) or a pointer that is
 * NULL on failure; nothing aborts or throws. The text of the last failed
 * load or session creation on the calling thread is mega_load_error(). One
 * model serves many sessions; a session is used by one thread at a time. */
#ifndef MEGA_KWS_H
#define MEGA_KWS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  MEGA_OK = 0,
  MEGA_ERR_INVALID_ARGUMENT = 1,
  MEGA_ERR_IO = 2,
  MEGA_ERR_BAD_MODEL = 3,
  MEGA_ERR_UNSUPPORTED_MODEL = 4,
  MEGA_ERR_NOT_STREAMABLE = 5,
  MEGA_ERR_TOO_LONG = 6,
  MEGA_ERR_OUT_OF_MEMORY = 7,
  MEGA_ERR_SELF_TEST_FAILED = 8,
  MEGA_ERR_NO_DEVICE = 9,      /* the backend asked for is not available */
  MEGA_ERR_DEVICE = 10,
  MEGA_ERR_BUSY = 11
} mega_status;

typedef struct mega_model mega_model;
typedef struct mega_session mega_session;

/* Loads and validates a .mega file. On failure returns NULL, sets *status
 * (if non-NULL) and the text returned by mega_load_error(). */
mega_model* mega_model_load(const char* path, mega_status* status);
const char* mega_load_error(void);
void mega_model_free(mega_model* model);

int32_t mega_model_sample_rate(const mega_model* model);
int32_t mega_model_n_classes(const mega_model* model);
const char* mega_model_label(const mega_model* model, int32_t index); /* NULL if out of range */
int64_t mega_model_chunk_samples(const mega_model* model);
int64_t mega_model_window_samples(const mega_model* model);
int32_t mega_model_streamable(const mega_model* model); /* 1: unidirectional EMA */

/* Creates a session on the CPU backend, one thread (all its memory is
 * allocated here). */
mega_session* mega_session_create(const mega_model* model, mega_status* status);

/* Session options. Fill them with mega_session_options_init() first: later
 * versions may add fields at the end. */
typedef struct mega_session_options {
  const char* backend; /* "cpu", "cuda" (NVIDIA GPU), or "auto": cuda when built in and a
                          GPU is present, else cpu. NULL means "cpu". */
  int32_t n_threads;   /* cpu: threads sharing each chunk's work, 1..16 [1] */
  int32_t fp16;        /* cuda: 1 for float16 activations (float32 accumulation) [0] */
  int32_t device;      /* cuda: device ordinal [0] */
} mega_session_options;
void mega_session_options_init(mega_session_options* options);
/* As mega_session_create, with options (NULL: the defaults). A backend that is
 * not available gives MEGA_ERR_NO_DEVICE and the reason in mega_load_error();
 * an unknown backend name or a bad option gives MEGA_ERR_INVALID_ARGUMENT. */
mega_session* mega_session_create_with_options(const mega_model* model, const mega_session_options* options,
                                               mega_status* status);
/* "cpu" or "cuda". */
const char* mega_session_backend(const mega_session* session);
void mega_session_free(mega_session* session);
void mega_session_reset(mega_session* session);

/* Streaming: consumes samples up to and including the one that completes the
 * next chunk (or all n). *n_consumed gets the count; *chunk_done is set to 1
 * when a chunk completed, and then logits (n_classes floats, may be NULL) get
 * the logits over the last window of chunks. */
mega_status mega_session_push(mega_session* session, const float* samples, int64_t n, int64_t* n_consumed,
                              int32_t* chunk_done, float* logits);

/* Offline classification of one clip (zero-padded to whole chunks, at least
 * one window). logits: n_classes floats. */
mega_status mega_session_classify(mega_session* session, const float* samples, int64_t n, float* logits);

/* Input hygiene counts since the session was created (mega.hpp, SessionStats):
 * NaN/Inf samples replaced by 0, samples beyond full scale clipped to +-1,
 * chunks or clips whose logits came out non-finite (zeroed; the state was
 * cleared).
 * Any output pointer may be NULL. */
mega_status mega_session_stats(const mega_session* session, int64_t* n_nonfinite_samples,
                               int64_t* n_clamped_samples, int64_t* n_state_resets);

/* Runs the self-test stored in the model file. */
mega_status mega_session_self_test(mega_session* session, float* max_abs_diff);

const char* mega_status_string(mega_status status);

#ifdef __cplusplus
}
#endif

#endif /* MEGA_KWS_H */
