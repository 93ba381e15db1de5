// SPDX-License-Identifier: Apache-2.0
/* Mega-chunk keyword spotting from a microphone: the C API of
 * libmega_kws_audio, a small library beside libmega_kws.
 *
 * The same path as `keyword_spotter listen`: PortAudio's capture callback
 * copies the frames into a lock-free ring; mega_mic_read takes them from it,
 * on the caller's thread, through the channel mixing and resampler (when the
 * device cannot open the model's rate), a session and a detector
 * (mega_kws.h), and returns the detections. It is a library of its own so
 * that programs that only embed the model (libmega_kws) need no PortAudio.
 *
 * Every function returns a status (mega_kws.h's mega_status) or a pointer
 * that is NULL on failure; the text of the last failure on the calling
 * thread is mega_audio_error(). Nothing prints.
 *
 *   mega_session* session = mega_session_create(model, NULL);
 *   mega_detector* detector = mega_detector_create(model, NULL, NULL);  // the model's tuned defaults
 *   mega_mic* mic = mega_mic_open(session, detector, NULL, &status);    // the default input
 *   mega_detection found[8];
 *   int32_t n = 0;
 *   while (mega_mic_read(mic, found, 8, 100, &n) == MEGA_OK)   // up to 100 ms per call
 *     for (int32_t i = 0; i < n; ++i) printf("%.3f %s\n", found[i].time_s, found[i].label);
 *   mega_mic_close(mic);  // then free the detector and the session
 *
 * Statuses: MEGA_ERR_NO_DEVICE when there is no input device (no sound
 * card, no sound server) or none matches the name asked for (the text lists
 * those there are); MEGA_ERR_DEVICE when the device cannot be opened or
 * started, or fails or stops delivering audio while it is read;
 * MEGA_ERR_NOT_STREAMABLE for a bidirectional model; MEGA_ERR_INVALID_ARGUMENT
 * for bad arguments or options. PortAudio has no timeouts of its own: a
 * wedged driver or sound server can block mega_mic_open (a missing one
 * cannot: that fails at once); mega_mic_close waits 3 s for such a device
 * and then leaves its close to finish in the background (the next open or
 * listing waits up to 5 s for it, then fails with MEGA_ERR_DEVICE). */
#ifndef MEGA_KWS_AUDIO_H
#define MEGA_KWS_AUDIO_H

#include <stdint.h>

#include "mega/mega_kws.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One audio input device as PortAudio sees it. */
typedef struct mega_audio_device {
  int32_t index;              /* PortAudio's device index (what device "3" opens) */
  int32_t is_default;         /* 1 for the default input */
  int32_t max_input_channels;
  double default_sample_rate;
  char name[256];             /* cut to fit, always terminated */
  char host_api[64];          /* "ALSA", "JACK Audio Connection Kit", ... */
} mega_audio_device;

/* The input devices: the first `capacity` into out (may be NULL when
 * capacity is 0), *n_devices the number there are. No sound system at all is
 * MEGA_OK with 0 devices. */
mega_status mega_audio_input_devices(mega_audio_device* out, int32_t capacity, int32_t* n_devices);

/* ALSA and JACK print pages of their own diagnostics on stderr when there is
 * no sound card or server. This hands both libraries handlers that drop them,
 * for the whole process (as keyword_spotter does without --verbose); call it
 * before opening or listing. */
void mega_audio_silence_library_messages(void);

/* The text of the last failure on the calling thread. */
const char* mega_audio_error(void);

typedef struct mega_mic mega_mic;

/* Fill them with mega_mic_options_init() first: it sets struct_size, which
 * lets later versions add fields at the end. */
typedef struct mega_mic_options {
  uint32_t struct_size; /* sizeof(mega_mic_options), set by _init() */
  const char* device;   /* NULL or "": the default input; digits: a device index; otherwise a
                           case-insensitive part of the name, an exact name winning [NULL] */
} mega_mic_options;
void mega_mic_options_init(mega_mic_options* options);

/* Opens the input device for the session's model (mono at the model's rate
 * if the device can; else two channels, averaged; else the device's rate,
 * resampled) and starts the capture. The audio goes through session and
 * detector (mega_kws.h: their options choose the backend, the thresholds,
 * the sensitivity; the detector must be for the session's model), which are
 * reset here; they must outlive the microphone and serve nothing else while
 * it is open. All memory is allocated here. Frames captured while nobody
 * reads wait in a ring of 4 s; later ones are dropped (and counted:
 * mega_mic_stats). */
mega_mic* mega_mic_open(mega_session* session, mega_detector* detector, const mega_mic_options* options,
                        mega_status* status);

/* Streams what the device captured through the session and the detector, on
 * the calling thread, until at least one detection is ready or timeout_ms
 * (0..600000) have passed; the detections go to out[0 .. *n_out - 1] (0 when
 * the time ran out), at most capacity (>= 1) of them; more wait for the next
 * call. time_s is seconds of audio since the stream started. On
 * MEGA_ERR_DEVICE the device is gone: close the microphone. */
mega_status mega_mic_read(mega_mic* mic, mega_detection* out, int32_t capacity, int32_t timeout_ms,
                          int32_t* n_out);

/* Since the stream started: seconds of audio streamed through the model, and
 * frames dropped because nobody read them within the ring's 4 s. Any output
 * pointer may be NULL. */
mega_status mega_mic_stats(const mega_mic* mic, double* seconds, int64_t* n_dropped_frames);

/* What was opened: the device (its index and name), and the rate it runs at
 * (the model's, or a rate that is resampled). name: valid until close. */
mega_status mega_mic_device(const mega_mic* mic, int32_t* index, const char** name, double* sample_rate);

/* Stops the capture, closes the device and frees everything (NULL: nothing);
 * returns within about 3 s even when the device does not respond. */
void mega_mic_close(mega_mic* mic);

#ifdef __cplusplus
}
#endif

#endif /* MEGA_KWS_AUDIO_H */
