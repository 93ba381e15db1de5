/* Streams a 16 kHz mono audio file through the mega_kws C API in 100 ms
 * blocks, as a microphone callback would, and prints the most probable label
 * after every chunk. Usage: embed_kws MODEL.mega FILE.wav [cpu|cuda|auto] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <mega/mega_kws.h>
#include <sndfile.h>

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
  options.backend = argc == 4 ? argv[3] : "auto";  /* auto: the GPU when there is one */
  mega_session* session = mega_session_create_with_options(model, &options, &st);  /* allocates everything */
  if (session) fprintf(stderr, "backend: %s\n", mega_session_backend(session));
  else fprintf(stderr, "%s\n", mega_load_error());
  int32_t n_classes = mega_model_n_classes(model);
  float* logits = malloc(sizeof(float) * (size_t)n_classes);
  float block[1600];
  int64_t t = 0;  /* samples consumed so far */
  sf_count_t n;
  while (session && logits && (n = sf_read_float(file, block, 1600)) > 0) {
    for (sf_count_t off = 0; off < n;) {  /* push returns after each completed chunk */
      int64_t used = 0;
      int32_t done = 0;
      st = mega_session_push(session, block + off, n - off, &used, &done, logits);
      if (st != MEGA_OK) break;
      off += used;
      t += used;
      if (!done) continue;
      int32_t best = 0;
      float sum = 0.0f;
      for (int32_t c = 0; c < n_classes; ++c) {
        if (logits[c] > logits[best]) best = c;
      }
      for (int32_t c = 0; c < n_classes; ++c) sum += expf(logits[c] - logits[best]);
      printf("%7.2f s  %-10s %.2f\n", (double)t / mega_model_sample_rate(model), mega_model_label(model, best),
             1.0 / sum);
    }
    if (st != MEGA_OK) break;
  }
  if (!session || st != MEGA_OK) fprintf(stderr, "error: %s\n", mega_status_string(st));
  int rc = session && logits && st == MEGA_OK ? 0 : 1;
  free(logits);
  mega_session_free(session);
  sf_close(file);
  mega_model_free(model);
  return rc;
}
