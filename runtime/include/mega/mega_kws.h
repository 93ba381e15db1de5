// SPDX-License-Identifier: Apache-2.0
/* Mega-chunk keyword spotting runtime: the C API.
 *
 * Every function returns a status code (MEGA_OK = 0) or a pointer that is
 * NULL on failure; nothing aborts or throws. The text of the last failed
 * load, session creation or detector creation on the calling thread is
 * mega_load_error(). One model serves many sessions and detectors; a session
 * or a detector is used by one thread at a time. Sessions and detectors keep
 * what they need of their model: the model may be freed before them.
 *
 * Keyword spotting in a few calls (error handling left out):
 *
 *   mega_model* model = mega_model_load("sc10-demo.mega", NULL);
 *   mega_session* session = mega_session_create(model, NULL);
 *   mega_detector* detector = mega_detector_create(model, NULL, NULL);  // the model's tuned defaults
 *   mega_detection found[8];
 *   int32_t n_found = 0;
 *   // for every block of 16 kHz samples in [-1, 1] (here 100 ms, so 8 is plenty):
 *   mega_session_detect(session, detector, block, 1600, found, 8, &n_found);
 *   for (int32_t i = 0; i < n_found; ++i) printf("%.3f %s\n", found[i].time_s, found[i].label);
 *
 * Nothing allocates after creation: mega_session_push, mega_session_detect,
 * mega_session_detect_flush and mega_detector_update run on memory that
 * mega_session_create and mega_detector_create allocated. */
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
  const char* backend; /* "cpu", "reference" (the scalar reference kernels, for checking),
                          "cuda" (NVIDIA GPU), or "auto": cuda when built in and a
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

/* Input hygiene counts since the session was created (mega.hpp, StreamStats):
 * NaN/Inf samples replaced by 0, samples beyond full scale clipped to +-1,
 * chunks or clips whose logits came out non-finite (zeroed; the state was
 * cleared).
 * Any output pointer may be NULL. */
mega_status mega_session_stats(const mega_session* session, int64_t* n_nonfinite_samples,
                               int64_t* n_clamped_samples, int64_t* n_state_resets);

/* Runs the self-test stored in the model file. */
mega_status mega_session_self_test(mega_session* session, float* max_abs_diff);

/* ---- Detection: window logits to keyword events ----
 *
 * Per chunk hop the window logits become posteriors (softmax), averaged over
 * the last smoothing_hops hops; a keyword fires when its smoothed score
 * reaches its threshold and it is the best keyword above threshold; then
 * every keyword is quiet for refractory_ms, and whatever was above threshold
 * must fall below it before it fires again, so one spoken word gives one
 * detection. Labels starting with '_' (_silence_, _unknown_) never fire.
 * The first hops after creation or reset (the model's window, W chunks) are
 * a warm-up: they neither fire nor enter the average, as the model misreads
 * sound as a keyword while its window fills; a word said from the start
 * fires from the hops after, and a stream that ends within the warm-up is
 * judged by mega_session_detect_flush.
 * This is keyword_spotter scan's and listen's detector (mega/detector.hpp),
 * with the same defaults and overrides, so it reports the same times. */
typedef struct mega_detector mega_detector;

/* What one detection reports. */
typedef struct mega_detection {
  int32_t label_index; /* index into the model's labels */
  const char* label;   /* the model's label text; valid until the detector is freed */
  float score;         /* the smoothed posterior when it fired, in (0, 1] */
  double time_s;       /* when the word was heard, in seconds from the start of the stream: the end of
                          the first hop of the run in which this keyword was the most probable label.
                          Smoothing delays firing by up to smoothing_hops - 1 hops, not this time. */
  int64_t hop_index;   /* the hop that fired, 0-based since the detector was created or reset */
} mega_detection;

/* Detector options: each field overrides one of the model's stored detection
 * defaults (keyword_spotter's --threshold, --smoothing, --refractory-ms,
 * --sensitivity); a negative value (or NULL thresholds) keeps the model's.
 * Fill them with mega_detector_options_init() first: it sets struct_size,
 * which lets later versions add fields at the end (a struct_size that is not
 * a size this library knows is refused). */
typedef struct mega_detector_options {
  uint32_t struct_size;    /* sizeof(mega_detector_options), set by _init() */
  const float* thresholds; /* one per label (n_classes values, each in (0, 1]), or NULL [NULL] */
  int32_t n_thresholds;    /* how many thresholds point to: n_classes when set [0] */
  float threshold;         /* one threshold for every label, in (0, 1]; not with thresholds [-1] */
  int32_t smoothing_hops;  /* posteriors averaged over this many hops, 1..1024 [-1] */
  int32_t refractory_ms;   /* quiet time after a detection, 0..600000 ms [-1] */
  float sensitivity;       /* 0..1, applied to the thresholds last: 0.5 keeps them exactly, 1 lowers each by
                              0.5, 0 raises each by 0.5, the move limited to [0.01, 0.99]: below 0.5 none
                              falls, above 0.5 none rises; negative: none [-1] */
} mega_detector_options;
void mega_detector_options_init(mega_detector_options* options);

/* A detector with the model's stored defaults (thresholds per label, 0.5 each
 * for a model with none tuned; smoothing; refractory time) after the options'
 * overrides (NULL: none). One hop is one chunk of the model. A value out of
 * range gives NULL, MEGA_ERR_INVALID_ARGUMENT and the reason in
 * mega_load_error(). All its memory is allocated here. */
mega_detector* mega_detector_create(const mega_model* model, const mega_detector_options* options,
                                    mega_status* status);
void mega_detector_free(mega_detector* detector);
/* Back to a fresh stream: no history, nothing suppressed, hop 0. */
void mega_detector_reset(mega_detector* detector);

/* The settings in force after the overrides. thresholds: n_classes floats
 * (may be NULL); any output pointer may be NULL. */
mega_status mega_detector_settings(const mega_detector* detector, float* thresholds, int32_t* smoothing_hops,
                                   int32_t* refractory_ms);

/* One hop: the window logits of one completed chunk (n_classes floats, as
 * mega_session_push gives them). *fired is set to 1 when a keyword fires, and
 * then *out (may be NULL) describes it; its time_s counts hops from the
 * detector's creation or last reset (the end of hop k is at
 * (k + 1) * chunk_samples / sample_rate), which is the stream's time when the
 * detector has seen every chunk of the session since its start. A NaN or an
 * infinity among the logits is refused (MEGA_ERR_INVALID_ARGUMENT, *fired 0)
 * and the detector is left as it was. */
mega_status mega_detector_update(mega_detector* detector, const float* logits, mega_detection* out,
                                 int32_t* fired);

/* Streaming detection in one call: pushes all n samples through the session
 * (as mega_session_push) and every completed chunk's logits through the
 * detector; the detections go to out[0 .. *n_out - 1], in order, with time_s
 * in the session's stream (seconds since it was created or reset, as
 * keyword_spotter scan prints them). At most one detection per completed
 * chunk, so capacity >= n / chunk_samples + 1 is always enough; a capacity
 * smaller than the number of chunks these samples complete is refused
 * (MEGA_ERR_INVALID_ARGUMENT, nothing consumed). The detector must come from
 * a model with the session's labels (MEGA_ERR_INVALID_ARGUMENT otherwise).
 * On an error status *n_out still counts the detections made before it. */
mega_status mega_session_detect(mega_session* session, mega_detector* detector, const float* samples, int64_t n,
                                mega_detection* out, int32_t capacity, int32_t* n_out);

/* At the end of a recording: completes a partly filled chunk with silence
 * (zeros; nothing if no samples are pending), so a word in the last partial
 * chunk is heard, then, unless that chunk fired, lets the smoothing window
 * shrink over the last hops (mega::Detector::finish), so a word that ends the
 * recording fires though fewer than smoothing_hops hops followed it; a
 * detection here is timed no later than the end of the audio (not in the
 * silence). The same code as keyword_spotter scan at the end of a file
 * (mega::KeywordStream, mega/keyword_stream.hpp). At most one detection
 * (capacity >= 1 once any chunk has been seen or samples are pending). */
mega_status mega_session_detect_flush(mega_session* session, mega_detector* detector, mega_detection* out,
                                      int32_t capacity, int32_t* n_out);

const char* mega_status_string(mega_status status);

/* The library's version, "MAJOR.MINOR.PATCH" (the CMake project's version,
 * also that of the installed MegaKWSConfigVersion.cmake and mega_kws.pc). */
const char* mega_version(void);

#ifdef __cplusplus
}
#endif

#endif /* MEGA_KWS_H */
