// SPDX-License-Identifier: Apache-2.0
/* Streams a mono audio file at the model's rate through the mega_kws C API in
 * 100 ms blocks, as a microphone callback would, and prints every keyword
 * detection as keyword_spotter scan does: the time the word was heard, its
 * label and its smoothed score, at the model's tuned detection defaults.
 * Usage: embed_kws MODEL.mega FILE.wav [cpu|cuda|auto] */
#include <stdio.h>

#include <mega/mega_kws.h>
#include <sndfile.h>

enum { kBlock = 1600, kMaxFound = 8 }; /* 100 ms at 16 kHz; 8 >= one detection per chunk of a block */

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: %s MODEL.mega FILE.wav [cpu|cuda|auto]\n", argv[0]);
    return 2;
  }
  mega_status st;
  mega_model* model = mega_model_load(argv[1], &st);
  if (!model) {
    fprintf(stderr, "%s: %s\n", argv[1], mega_load_error());
    return 3;
  }
  SF_INFO info = {0};
  SNDFILE* file = sf_open(argv[2], SFM_READ, &info);
  if (!file || info.channels != 1 || info.samplerate != mega_model_sample_rate(model)) {
    fprintf(stderr, "%s: need a mono %d Hz audio file (%s)\n", argv[2], mega_model_sample_rate(model),
            file ? "wrong format" : sf_strerror(NULL));
    if (file) sf_close(file);
    mega_model_free(model);
    return 1;
  }
  mega_session_options options;
  mega_session_options_init(&options);
  options.backend = argc == 4 ? argv[3] : "auto"; /* auto: the GPU when there is one */
  /* everything is allocated here; nothing is allocated per block */
  mega_session* session = mega_session_create_with_options(model, &options, &st);
  mega_detector* detector = session ? mega_detector_create(model, NULL, &st) : NULL; /* the model's defaults */
  if (session) fprintf(stderr, "backend: %s\n", mega_session_backend(session));
  if (!detector) fprintf(stderr, "%s\n", mega_load_error());
  float block[kBlock];
  mega_detection found[kMaxFound];
  int32_t n_found = 0;
  sf_count_t n;
  while (detector && st == MEGA_OK && (n = sf_read_float(file, block, kBlock)) > 0) {
    st = mega_session_detect(session, detector, block, n, found, kMaxFound, &n_found);
    for (int32_t i = 0; i < n_found; ++i) printf("%.3f\t%s\t%.3f\n", found[i].time_s, found[i].label, found[i].score);
  }
  if (detector && st == MEGA_OK) { /* a word in the last, partly filled chunk */
    st = mega_session_detect_flush(session, detector, found, kMaxFound, &n_found);
    for (int32_t i = 0; i < n_found; ++i) printf("%.3f\t%s\t%.3f\n", found[i].time_s, found[i].label, found[i].score);
  }
  if (st != MEGA_OK) fprintf(stderr, "error: %s\n", mega_status_string(st));
  const int rc = detector && st == MEGA_OK ? 0 : 1;
  mega_detector_free(detector);
  mega_session_free(session);
  sf_close(file);
  mega_model_free(model);
  return rc;
}
